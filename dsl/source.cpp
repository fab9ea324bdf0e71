#include "source.hpp"

#include <algorithm>
#include <cctype>

namespace tessel::dsl {

source::source(std::string_view text, std::string file) : text_(text), file_(std::move(file)) {
  line_starts_.push_back(0);
  for (std::size_t i = 0; i < text_.size(); ++i) {
    if (text_[i] == '\n') line_starts_.push_back(i + 1);
  }
}

int source::line_of(std::size_t offset) const {
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  return static_cast<int>(it - line_starts_.begin());
}

int source::column_of(std::size_t offset) const {
  offset = std::min(offset, text_.size());
  auto start = line_starts_[static_cast<std::size_t>(line_of(offset) - 1)];
  return static_cast<int>(offset - start) + 1;
}

std::string_view source::line_text(int line) const {
  if (line < 1 || static_cast<std::size_t>(line) > line_starts_.size()) return {};
  auto start = line_starts_[static_cast<std::size_t>(line - 1)];
  auto end = text_.find('\n', start);
  if (end == std::string_view::npos) end = text_.size();
  auto result = text_.substr(start, end - start);
  if (!result.empty() && result.back() == '\r') result.remove_suffix(1);
  return result;
}

std::string source::normalized(span s) const {
  std::string out;
  bool in_comment = false;
  bool pending_space = false;
  for (std::size_t i = s.begin; i < std::min(s.end, text_.size()); ++i) {
    char c = text_[i];
    if (in_comment) {
      in_comment = c != '\n';
      continue;
    }
    if (c == '#') {
      in_comment = true;
      pending_space = true;
    } else if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      pending_space = true;
    } else {
      if (pending_space && !out.empty()) out += ' ';
      pending_space = false;
      out += c;
    }
  }
  return out;
}

namespace {

/// Lines longer than this are not copied into a diagnostic (a one-line text of
/// megabytes would be copied once per error); the header still locates it.
constexpr std::size_t max_shown_line = 1000;

}  // namespace

void reporter::error(std::size_t offset, std::string message, std::string hint) {
  if (list_.size() >= max_diagnostics) {
    ++dropped_;
    return;
  }
  diagnostic d;
  d.file = source_->file();
  d.line = source_->line_of(offset);
  d.column = source_->column_of(offset);
  d.message = std::move(message);
  d.hint = std::move(hint);
  const auto line = source_->line_text(d.line);
  if (line.size() <= max_shown_line) {
    d.source_line = std::string(line);
    for (auto& c : d.source_line)  // a NUL or an escape is not written to a terminal; columns hold
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == '\x7f') c = '?';
  }
  list_.push_back(std::move(d));
}

void reporter::error(std::string message, std::string hint) {
  if (list_.size() >= max_diagnostics) {
    ++dropped_;
    return;
  }
  diagnostic d;
  d.file = source_->file();
  d.message = std::move(message);
  d.hint = std::move(hint);
  list_.push_back(std::move(d));
}

void reporter::add(diagnostic d) {
  if (list_.size() >= max_diagnostics) {
    ++dropped_;
    return;
  }
  list_.push_back(std::move(d));
}

void reporter::throw_if_any() const {
  if (list_.empty()) return;
  auto all = list_;
  if (dropped_ > 0) {
    diagnostic more;
    more.file = source_->file();
    more.message = std::to_string(dropped_) + " more errors not shown (the first " +
                   std::to_string(max_diagnostics) + " are)";
    all.push_back(std::move(more));
  }
  throw space_error(std::move(all));
}

}  // namespace tessel::dsl
