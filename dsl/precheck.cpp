#include "precheck.hpp"

#include <cctype>

namespace tessel::dsl {

namespace {

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

/// Skips a comment or string starting at `i`; returns the index after it.
std::size_t skip_comment_or_string(std::string_view text, std::size_t i) {
  char close = text[i] == '#' ? '\n' : '"';
  std::size_t end = i + 1;
  while (end < text.size() && text[end] != close && text[end] != '\n') ++end;
  if (close == '"' && end < text.size() && text[end] == '"') ++end;
  return end;
}

bool is_not_keyword(std::string_view text, std::size_t i) {
  return text.substr(i, 3) == "not" && (i + 3 == text.size() || !is_word_char(text[i + 3])) &&
         (i == 0 || !is_word_char(text[i - 1]));
}

/// Tracks bracket depth and runs of one prefix operator.
struct depth_counter {
  std::size_t depth = 0;
  std::size_t run = 0;
  char run_kind = 0;  ///< '-' or 'n' (not)

  /// Feeds the token starting with `c`; false once too deep.
  bool feed(char c, bool is_not) {
    char kind = c == '-' ? '-' : (is_not ? 'n' : '\0');
    run = kind == '\0' ? 0 : (kind == run_kind ? run + 1 : 1);
    run_kind = kind;
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    return depth <= max_nesting && run <= max_nesting;
  }
};

}  // namespace

std::optional<precheck_problem> precheck(std::string_view text) {
  depth_counter counter;
  for (std::size_t i = 0; i < text.size();) {
    char c = text[i];
    if (c == '#' || c == '"') {
      i = skip_comment_or_string(text, i);
    } else if (static_cast<unsigned char>(c) >= 0x80) {
      return precheck_problem{i, "a non-ASCII character outside a comment or string",
                              "names, numbers and operators are ASCII"};
    } else if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      ++i;
    } else {
      bool is_not = is_not_keyword(text, i);
      if (!counter.feed(c, is_not)) {
        return precheck_problem{
            i, "expression nested more than " + std::to_string(max_nesting) + " levels deep",
            "split it with let"};
      }
      i += is_not ? 3 : 1;
    }
  }
  return std::nullopt;
}

}  // namespace tessel::dsl
