// split_command.cpp: POSIX-shell-like word splitting of a command string
// (quotes and backslashes only: no variables, globs, pipes or redirections),
// and its inverse for one word, shell_quote.
#include <tessel/backends.hpp>
#include <tessel/error.hpp>

#include <fmt/format.h>

#include <utility>

namespace tessel {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

std::vector<std::string> split_command(std::string_view command) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;  // a word has started (possibly empty, as in '')
  for (std::size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (is_blank(c)) {
      if (in_word) words.push_back(std::exchange(word, {}));
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\') {
      if (++i == command.size())
        throw error(fmt::format("command ends with a lone backslash: {}", command));
      word += command[i];
    } else if (c == '\'') {
      const auto end = command.find('\'', i + 1);
      if (end == std::string_view::npos)
        throw error(fmt::format("unbalanced ' in command: {}", command));
      word.append(command.substr(i + 1, end - i - 1));
      i = end;
    } else if (c == '"') {
      for (++i;; ++i) {
        if (i == command.size()) throw error(fmt::format("unbalanced \" in command: {}", command));
        const char d = command[i];
        if (d == '"') break;
        // Inside double quotes a backslash escapes only " \ $ ` (POSIX).
        if (d == '\\' && i + 1 < command.size() &&
            std::string_view("\"\\$`").find(command[i + 1]) != std::string_view::npos)
          word += command[++i];
        else
          word += d;
      }
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

std::string shell_quote(std::string_view word) {
  constexpr std::string_view plain =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-";
  if (!word.empty() && word.find_first_not_of(plain) == std::string_view::npos)
    return std::string(word);
  std::string out = "'";
  for (const char c : word) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

}  // namespace tessel
