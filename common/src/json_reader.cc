#include "crosstune/json_reader.h"

#include <iterator>
#include <ostream>
#include <streambuf>

#include "crosstune/json_error.h"
#include "crosstune/text.h"

namespace crosstune {
using json = nlohmann::json;

namespace {

// A pointer into the text that also records how far the parser has read, so that a refusal from
// the parser callback (which is told the depth, not the position) can say where it happened.
class CountingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  CountingIterator(const char* p, const char** read_up_to) : p_(p), read_up_to_(read_up_to) {}
  reference operator*() const { return *p_; }
  CountingIterator& operator++() {
    *read_up_to_ = ++p_;
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator old = *this;
    ++*this;
    return old;
  }
  bool operator==(const CountingIterator& o) const { return p_ == o.p_; }
  bool operator!=(const CountingIterator& o) const { return p_ != o.p_; }

 private:
  const char* p_;
  const char** read_up_to_;
};

// Thrown by the parser callback to stop the parse: nothing deeper is built.
struct TooDeep {};

// Keeps the first `limit` bytes written to it; the write that overflows throws Full, which the
// stream passes on (its exception mask has badbit), so the serializer stops there.
class PrefixBuf : public std::streambuf {
 public:
  struct Full {};
  explicit PrefixBuf(size_t limit) : limit_(limit) {}
  const std::string& text() const { return text_; }

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    size_t room = limit_ - text_.size();
    if (static_cast<size_t>(n) > room) {
      text_.append(s, room);
      throw Full{};
    }
    text_.append(s, static_cast<size_t>(n));
    return n;
  }
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    char ch = traits_type::to_char_type(c);
    xsputn(&ch, 1);
    return c;
  }

 private:
  size_t limit_;
  std::string text_;
};

}  // namespace

std::string JsonErrorReason(const json::exception& e) {
  std::string_view what = e.what();
  if (size_t at = what.find("] "); what.rfind("[json.exception.", 0) == 0 && at != what.npos) {
    what.remove_prefix(at + 2);
  }
  if (size_t at = what.find("parse error"); at != std::string_view::npos) {
    if (size_t colon = what.find(": ", at); colon != std::string_view::npos) {
      what.remove_prefix(colon + 2);
    }
  }
  return EscapeForLog(what, 160);
}

Expected<json> ParseJson(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return Status(ErrorCode::kInvalidArgument, "JSON text of " + std::to_string(text.size()) +
                                                   " bytes is over the limit of " +
                                                   std::to_string(limits.max_bytes));
  }
  const char* read_up_to = text.data();
  CountingIterator first(text.data(), &read_up_to);
  CountingIterator last(text.data() + text.size(), &read_up_to);
  const int max_depth = limits.max_depth;
  // `depth` counts the containers around the one that opens: refusing at max_depth keeps at
  // most max_depth levels.
  auto callback = [max_depth](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= max_depth) {
      throw TooDeep{};
    }
    return true;
  };
  try {
    return json::parse(first, last, callback, /*allow_exceptions=*/true);
  } catch (const TooDeep&) {
    return Status(ErrorCode::kInvalidArgument, "JSON nested deeper than " +
                                                   std::to_string(max_depth) + " levels at byte " +
                                                   std::to_string(read_up_to - text.data()));
  } catch (const json::parse_error& e) {
    return Status(
        ErrorCode::kInvalidArgument,
        "not JSON: syntax error at byte " + std::to_string(e.byte) + ": " + JsonErrorReason(e));
  } catch (const json::exception& e) {
    // out_of_range.406: a number past a double's range ("1e309"), which the parser reports by
    // exception even to a callback parser.
    return Status(ErrorCode::kInvalidArgument, "not JSON: " + JsonErrorReason(e) + " near byte " +
                                                   std::to_string(read_up_to - text.data()));
  }
}

std::string JsonExcerpt(const json& v, size_t max_bytes) {
  PrefixBuf buf(max_bytes);
  std::ostream os(&buf);
  os.exceptions(std::ios::badbit);
  bool whole = true;
  try {
    os << v;
  } catch (...) {
    // PrefixBuf::Full, or a string that is not UTF-8 (the stream's serializer is strict): either
    // way the excerpt ends where the text stopped.
    whole = false;
  }
  // The serializer escaped C0 controls, quotes and backslashes; DEL and the C1 controls it
  // leaves as they are get JSON escapes too, so the excerpt stays on one line of a terminal.
  static constexpr char kHex[] = "0123456789abcdef";
  const std::string& t = buf.text();
  std::string out;
  out.reserve(t.size() + 3);
  for (size_t i = 0; i < t.size(); ++i) {
    auto b = static_cast<unsigned char>(t[i]);
    unsigned control = 0x100;
    if (b == 0x7f) {
      control = b;
    } else if (b == 0xc2 && i + 1 < t.size() && static_cast<unsigned char>(t[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(t[i + 1]) < 0xa0) {
      control = static_cast<unsigned char>(t[++i]);
    }
    if (control < 0x100) {
      out += "\\u00";
      out += kHex[control >> 4];
      out += kHex[control & 0xf];
    } else {
      out += static_cast<char>(b);
    }
  }
  // A cut may split a UTF-8 sequence.
  out = ToValidUtf8(out);
  if (!whole) out += "...";
  return out;
}

}  // namespace crosstune
