// SPDX-License-Identifier: Apache-2.0
// A small XML reader and writer for topology files (topology layer). It handles the subset those files use:
// an optional <?xml?> declaration, comments, elements, attributes in single or double quotes, the five named
// entities and numeric character references. Text between elements must be blank; DOCTYPE, CDATA and
// processing instructions are rejected. Every error names the source and line: "topo.xml:12: ...".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace cfx::topo::xml {

struct Element {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;  // in document order, names unique
  std::vector<Element> children;
  int line = 0;  // where the start tag begins

  const std::string* attribute(std::string_view key) const;
  Element& set(std::string key, std::string value);  // appends; the writer keeps the order
};

// Parses `text`; `source` (a file name) prefixes error messages. InvalidArgument on malformed input.
Result<Element> parse(std::string_view text, const std::string& source);

// Serialises with two-space indentation, one element per line, and a trailing newline.
std::string write(const Element& root);

}  // namespace cfx::topo::xml
