// SPDX-License-Identifier: Apache-2.0
// cfxrun: passing the ranks' output through with each line tagged by its rank ("[rank 3] ..."), so that a WARN
// from any rank reaches the user and says whose it is. Used when NCCL_DEBUG is set or --tag-output is given.
//
// Each rank writes into two pipes (stdout, stderr); cfxrun reads them while it waits for the ranks and writes
// whole lines, prefixed, to its own stdout and stderr, so lines of different ranks never mix mid-line. A line
// longer than kMaxLine is passed on in pieces, each prefixed.
#pragma once

#include <string>
#include <vector>

namespace cfxrun {

class RankOutput {
 public:
  static constexpr size_t kMaxLine = 64 * 1024;

  // Creates the pipes of nRanks ranks. False (with a message on stderr) when the system refuses.
  bool open(int nRanks);
  // In the child of `rank`, before exec: its stdout and stderr become the write ends of its pipes.
  void attachChild(int rank);
  // In cfxrun after every fork: closes the write ends, so each pipe reports EOF when its rank (and whatever it
  // started) has exited.
  void closeChildEnds();
  // Waits up to timeoutMs for output and relays what arrived; returns at once when every pipe is closed.
  void pump(int timeoutMs);
  // Relays what is left: until every pipe is at EOF, or for at most timeoutMs (a rank's own child may keep a pipe
  // open after the rank ended), then the unfinished last lines.
  void drain(int timeoutMs);

 private:
  struct Stream {
    int readFd = -1;
    int writeFd = -1;
    int rank = 0;
    int destFd = 1;       // where its lines go: 1 (stdout) or 2 (stderr)
    std::string pending;  // the start of a line not yet ended
  };
  void relay(Stream& s, bool atEof);
  void emit(const Stream& s, const char* data, size_t n);

  std::vector<Stream> streams_;  // rank r: [2r] stdout, [2r + 1] stderr
};

}  // namespace cfxrun
