// The request corpus under tests/http/corpus: one request per file, written with escapes so that
// every byte is visible (\r \n \t \0 \xHH \\; real line breaks are ignored). A file's name starts
// with the status the server must answer ("400-...") or "ok-" for a valid request.
#pragma once

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gluon::http_testing {

struct corpus_entry {
    std::string name;
    int status;  // 0: valid
    std::string bytes;
};

inline std::string unescape(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (c == '\n') continue;
        if (c != '\\' || i + 1 == s.size()) {
            out += c;
            continue;
        }
        char e = s[++i];
        switch (e) {
            case 'r': out += '\r'; break;
            case 'n': out += '\n'; break;
            case 't': out += '\t'; break;
            case '0': out += '\0'; break;
            case 'x': out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16)); i += 2; break;
            default: out += e;
        }
    }
    return out;
}

inline std::vector<corpus_entry> load_corpus() {
    std::vector<corpus_entry> v;
    DIR* d = opendir(GLUON_HTTP_CORPUS_DIR);
    if (!d) return v;
    while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (name.size() < 5 || name.substr(name.size() - 4) != ".txt") continue;
        std::ifstream f(std::string(GLUON_HTTP_CORPUS_DIR) + "/" + name, std::ios::binary);
        std::stringstream ss;
        ss << f.rdbuf();
        int status = name.rfind("ok-", 0) == 0 ? 0 : std::stoi(name.substr(0, 3));
        v.push_back({name.substr(0, name.size() - 4), status, unescape(ss.str())});
    }
    closedir(d);
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.name < b.name; });
    return v;
}

}  // namespace gluon::http_testing
