// The little JSON the native sidecar needs: the metadata it is sent (a list of [key, value]
// strings, as json.dumps writes it) and the strings of the error bodies it sends back.
// Why not a library: two shapes only, and no extra build dependency for CI.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace sidecar_json {

inline void AppendUtf8(uint32_t code, std::string* out) {
    if (code < 0x80) {
        out->push_back(static_cast<char>(code));
    } else if (code < 0x800) {
        out->push_back(static_cast<char>(0xC0 | (code >> 6)));
        out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else if (code < 0x10000) {
        out->push_back(static_cast<char>(0xE0 | (code >> 12)));
        out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
        out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else {
        out->push_back(static_cast<char>(0xF0 | (code >> 18)));
        out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
        out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
        out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    }
}

class Parser {
  public:
    explicit Parser(const std::string& text) : text_(text) {}

    // [[k, v], ...] with string keys and values, nothing else.
    bool Pairs(std::vector<std::pair<std::string, std::string>>* pairs) {
        if (!Expect('[')) return false;
        if (Peek() == ']') return Expect(']') && AtEnd();
        do {
            std::pair<std::string, std::string> pair;
            if (!Expect('[') || !String(&pair.first) || !Expect(',') || !String(&pair.second) ||
                !Expect(']')) {
                return false;
            }
            pairs->push_back(std::move(pair));
        } while (Accept(','));
        return Expect(']') && AtEnd();
    }

  private:
    void Skip() {
        while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                       text_[pos_] == '\t' || text_[pos_] == '\r')) {
            ++pos_;
        }
    }
    char Peek() {
        Skip();
        return pos_ < text_.size() ? text_[pos_] : '\0';
    }
    bool Accept(char c) {
        if (Peek() != c) return false;
        ++pos_;
        return true;
    }
    bool Expect(char c) { return Accept(c); }
    bool AtEnd() { return Peek() == '\0' && pos_ == text_.size(); }

    bool Hex4(uint32_t* code) {
        if (pos_ + 4 > text_.size()) return false;
        *code = 0;
        for (int i = 0; i < 4; ++i) {
            const char c = text_[pos_++];
            *code <<= 4;
            if (c >= '0' && c <= '9') *code |= static_cast<uint32_t>(c - '0');
            else if (c >= 'a' && c <= 'f') *code |= static_cast<uint32_t>(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F') *code |= static_cast<uint32_t>(c - 'A' + 10);
            else return false;
        }
        return true;
    }

    // \uXXXX, with a surrogate pair joined (json.dumps escapes non-ASCII this way).
    bool Unicode(std::string* out) {
        uint32_t code = 0;
        if (!Hex4(&code)) return false;
        if (code >= 0xD800 && code < 0xDC00 && text_.compare(pos_, 2, "\\u") == 0) {
            pos_ += 2;
            uint32_t low = 0;
            if (!Hex4(&low) || low < 0xDC00 || low >= 0xE000) return false;
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        }
        AppendUtf8(code, out);
        return true;
    }

    bool Escape(std::string* out) {
        if (pos_ >= text_.size()) return false;
        const char c = text_[pos_++];
        switch (c) {
            case '"': case '\\': case '/': out->push_back(c); return true;
            case 'b': out->push_back('\b'); return true;
            case 'f': out->push_back('\f'); return true;
            case 'n': out->push_back('\n'); return true;
            case 'r': out->push_back('\r'); return true;
            case 't': out->push_back('\t'); return true;
            case 'u': return Unicode(out);
            default: return false;
        }
    }

    bool String(std::string* out) {
        if (!Expect('"')) return false;
        while (pos_ < text_.size()) {
            const char c = text_[pos_++];
            if (c == '"') return true;
            if (c != '\\') {
                out->push_back(c);
            } else if (!Escape(out)) {
                return false;
            }
        }
        return false;
    }

    const std::string& text_;
    size_t pos_ = 0;
};

inline bool ParsePairs(const std::string& text,
                       std::vector<std::pair<std::string, std::string>>* pairs) {
    return Parser(text).Pairs(pairs);
}

// What gRPC accepts as a header name: lower-case letters, digits, '-', '_' and '.'.
inline bool LegalHeaderKey(const std::string& key) {
    if (key.empty()) return false;
    for (const char c : key) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                        c == '_' || c == '.';
        if (!ok) return false;
    }
    return true;
}

// Length of the valid UTF-8 sequence at `i` (0: invalid), so Python's json.loads, which
// wants UTF-8, never chokes on a server message that is not.
inline size_t Utf8Length(const std::string& s, size_t i) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = byte(i);
    const size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    if (n == 0 || i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k) {
        if ((byte(i + k) & 0xC0) != 0x80) return 0;
    }
    return n;
}

// A JSON string literal; bytes that are not UTF-8 become U+FFFD.
inline std::string Quote(const std::string& s) {
    std::string out = "\"";
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(static_cast<char>(c));
            ++i;
        } else if (c < 0x20) {
            char escaped[8];
            std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
            out += escaped;
            ++i;
        } else if (c < 0x80) {
            out.push_back(static_cast<char>(c));
            ++i;
        } else if (const size_t n = Utf8Length(s, i)) {
            out.append(s, i, n);
            i += n;
        } else {
            out += "\\ufffd";
            ++i;
        }
    }
    return out + "\"";
}

}  // namespace sidecar_json
