// A probe of the text mode's string helpers (text.h), for the differential test against
// Python (tests/integration/server/test_ct2_text_helpers.py): not part of the backend.
//
// Reads lines "<mode> <hex> [<hex> ...]" from stdin and writes one line for each:
//   utf8 <text>        Utf8Problem(text) as hex ("" where the text is valid UTF-8)
//   strip <text>       PythonStrip(text) as hex (valid UTF-8 only)
//   detok <tokens...>  Detokenize(tokens) as hex
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "text.h"

namespace {

std::string
FromHex(const std::string& hex)
{
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::string
ToHex(const std::string& text)
{
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : text) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

}  // namespace

int
main()
{
  using namespace triton_kit::ct2;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream words(line);
    std::string mode, word;
    words >> mode;
    std::vector<std::string> args;
    while (words >> word) {
      args.push_back(FromHex(word == "-" ? "" : word));
    }
    if (args.empty()) {
      args.emplace_back();
    }
    if (mode == "utf8") {
      std::cout << ToHex(Utf8Problem(args[0])) << "\n";
    } else if (mode == "strip") {
      std::cout << ToHex(PythonStrip(args[0])) << "\n";
    } else if (mode == "detok") {
      std::cout << ToHex(Detokenize(args)) << "\n";
    } else {
      std::cerr << "unknown mode " << mode << "\n";
      return 2;
    }
  }
  return 0;
}
