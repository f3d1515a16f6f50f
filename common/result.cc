#include "common/result.h"

namespace sk {

std::string Failure::describe() const {
    std::string s(to_string(code));
    s += ": ";
    s += message;
    return s;
}

}  // namespace sk
