// JSON literals for the Check programs: J(text) parses strictly
// (common/daemons/json.h) and fails the test when the literal itself is malformed.
#pragma once

#include <json/json.h>

#include "common/daemons/json.h"
#include "tests/unit/check_main.h"

static inline Json::Value J(const char *text) {
    auto v = sk::json::parse(text);
    ck_assert_msg(v.ok(), "bad test JSON: %s", text);
    return *v;
}
