// SPDX-License-Identifier: Apache-2.0
// The XML subset reader and writer (topology layer); see xml.h for what is accepted.
#include "topology/xml.h"

#include <cctype>
#include <cstdint>

namespace cfx::topo::xml {

const std::string* Element::attribute(std::string_view key) const {
  for (const auto& [k, v] : attributes)
    if (k == key) return &v;
  return nullptr;
}

Element& Element::set(std::string key, std::string value) {
  attributes.emplace_back(std::move(key), std::move(value));
  return *this;
}

namespace {

bool isNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
bool isNameChar(char c) {
  return isNameStart(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.';
}

void appendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  Result<Element> document() {
    skipMisc();
    if (!error_.ok()) return error_;
    if (startsWith("<?xml")) {
      const size_t end = text_.find("?>", pos_);
      if (end == std::string_view::npos) return fail("the <?xml declaration is not closed with '?>'");
      advanceTo(end + 2);
    }
    skipMisc();
    if (!error_.ok()) return error_;
    if (atEnd()) return fail("the document is empty: expected a root element");
    if (peek() != '<') return fail("expected '<' to open the root element");
    Element root;
    CFX_TRY(element(root, 0));
    skipMisc();
    if (!atEnd()) return fail("unexpected content after the root element </" + root.name + ">");
    if (!error_.ok()) return error_;
    return root;
  }

 private:
  bool atEnd() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }
  bool startsWith(std::string_view s) const { return text_.substr(pos_, s.size()) == s; }
  void advance() {
    if (text_[pos_] == '\n') ++line_;
    ++pos_;
  }
  void advanceTo(size_t end) {
    while (pos_ < end) advance();
  }
  Status fail(const std::string& what) const { return fail(what, line_); }
  Status fail(const std::string& what, int line) const {
    return Status::error(Errc::InvalidArgument, strprintf("%s:%d: %s", source_.c_str(), line, what.c_str()));
  }

  void skipBlanks() {
    while (!atEnd() && std::isspace(static_cast<unsigned char>(peek()))) advance();
  }
  // Blanks and comments; an unclosed comment is left for the caller to report.
  void skipMisc() {
    for (;;) {
      skipBlanks();
      if (!startsWith("<!--")) return;
      const size_t end = text_.find("-->", pos_ + 4);
      if (end == std::string_view::npos) {
        error_ = fail("the comment is not closed with '-->'");
        pos_ = text_.size();
        return;
      }
      advanceTo(end + 3);
    }
  }

  Result<std::string> name(const char* what) {
    if (atEnd() || !isNameStart(peek())) return fail(strprintf("expected %s", what));
    const size_t start = pos_;
    while (!atEnd() && isNameChar(peek())) advance();
    return std::string(text_.substr(start, pos_ - start));
  }

  Status entity(std::string& out) {
    const size_t end = text_.find(';', pos_);
    if (end == std::string_view::npos || end - pos_ > 12) return fail("an '&' does not start an entity such as &amp;");
    const std::string_view ref = text_.substr(pos_ + 1, end - pos_ - 1);
    if (ref == "lt")
      out += '<';
    else if (ref == "gt")
      out += '>';
    else if (ref == "amp")
      out += '&';
    else if (ref == "quot")
      out += '"';
    else if (ref == "apos")
      out += '\'';
    else if (ref.size() > 1 && ref[0] == '#') {
      const bool hex = ref[1] == 'x';
      uint32_t cp = 0;
      const std::string_view digits = ref.substr(hex ? 2 : 1);
      if (digits.empty()) return fail("an empty character reference");
      for (char c : digits) {
        if (!(hex ? std::isxdigit(static_cast<unsigned char>(c)) : std::isdigit(static_cast<unsigned char>(c))))
          return fail("a malformed character reference &" + std::string(ref) + ";");
        cp =
            cp * (hex ? 16 : 10) +
            static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (std::tolower(c) - 'a' + 10));
        if (cp > 0x10FFFF) return fail("a character reference beyond U+10FFFF");
      }
      if (cp == 0) return fail("a character reference to U+0000");
      appendUtf8(out, cp);
    } else {
      return fail("the unknown entity &" + std::string(ref) + ";");
    }
    advanceTo(end + 1);
    return {};
  }

  Status attributeValue(std::string& out) {
    if (atEnd() || (peek() != '"' && peek() != '\'')) return fail("expected a quoted attribute value");
    const char quote = peek();
    const int startLine = line_;
    advance();
    while (!atEnd() && peek() != quote) {
      if (peek() == '<') return fail("'<' inside an attribute value; write &lt;");
      if (peek() == '&') {
        CFX_TRY(entity(out));
        continue;
      }
      out += peek();
      advance();
    }
    if (atEnd()) return fail("the attribute value is not closed", startLine);
    advance();
    return {};
  }

  Status startTag(Element& el) {
    advance();  // '<'
    CFX_TRY_ASSIGN(el.name, name("an element name after '<'"));
    for (;;) {
      const size_t before = pos_;
      skipBlanks();
      if (atEnd()) return fail("the tag <" + el.name + "> is not closed", el.line);
      if (peek() == '>' || startsWith("/>")) return {};
      if (pos_ == before) return fail("expected a blank between attributes of <" + el.name + ">");
      CFX_TRY_ASSIGN(std::string key, name("an attribute name or '>'"));
      if (el.attribute(key)) return fail("the attribute '" + key + "' appears twice in <" + el.name + ">");
      skipBlanks();
      if (atEnd() || peek() != '=') return fail("expected '=' after the attribute '" + key + "'");
      advance();
      skipBlanks();
      std::string value;
      CFX_TRY(attributeValue(value));
      el.set(std::move(key), std::move(value));
    }
  }

  Status element(Element& el, int depth) {
    if (depth > 64) return fail("elements are nested more than 64 deep");
    el.line = line_;
    CFX_TRY(startTag(el));
    if (startsWith("/>")) {
      advanceTo(pos_ + 2);
      return {};
    }
    advance();  // '>'
    for (;;) {
      skipMisc();
      if (!error_.ok()) return error_;
      if (atEnd()) return fail("the element <" + el.name + "> is never closed", el.line);
      if (peek() != '<') return fail("unexpected text inside <" + el.name + ">; only elements belong here");
      if (startsWith("</")) {
        advanceTo(pos_ + 2);
        CFX_TRY_ASSIGN(std::string closing, name("an element name after '</'"));
        if (closing != el.name)
          return fail(strprintf("</%s> closes <%s>, opened at line %d", closing.c_str(), el.name.c_str(), el.line));
        skipBlanks();
        if (atEnd() || peek() != '>') return fail("expected '>' to end </" + closing + ">");
        advance();
        return {};
      }
      if (startsWith("<!") || startsWith("<?"))
        return fail("DOCTYPE, CDATA and processing instructions are not supported");
      el.children.emplace_back();
      CFX_TRY(element(el.children.back(), depth + 1));
    }
  }

  std::string_view text_;
  const std::string& source_;
  size_t pos_ = 0;
  int line_ = 1;
  Status error_;
};

void escape(std::string& out, const std::string& value) {
  for (char c : value) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\n':
        out += "&#10;";
        break;
      case '\t':
        out += "&#9;";
        break;
      case '\r':
        out += "&#13;";
        break;
      default:
        out += c;
    }
  }
}

void writeElement(std::string& out, const Element& el, int depth) {
  out.append(static_cast<size_t>(depth) * 2, ' ');
  out += '<';
  out += el.name;
  for (const auto& [k, v] : el.attributes) {
    out += ' ';
    out += k;
    out += "=\"";
    escape(out, v);
    out += '"';
  }
  if (el.children.empty()) {
    out += "/>\n";
    return;
  }
  out += ">\n";
  for (const Element& c : el.children) writeElement(out, c, depth + 1);
  out.append(static_cast<size_t>(depth) * 2, ' ');
  out += "</" + el.name + ">\n";
}

}  // namespace

Result<Element> parse(std::string_view text, const std::string& source) { return Parser(text, source).document(); }

std::string write(const Element& root) {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  writeElement(out, root, 0);
  return out;
}

}  // namespace cfx::topo::xml
