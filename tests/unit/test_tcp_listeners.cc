// agent/tcp_listeners: the listener a port-forward may reach, from the text
// of /proc/net/tcp and /proc/net/tcp6 (lines as the kernel prints them).
#include <check.h>

#include <string>

#include "agent/tcp_listeners.h"
#include "tests/unit/check_main.h"

using namespace sk::agent;

namespace {

const char kHeader[] =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
    "timeout inode\n";

std::string line(const char *local, const char *st, unsigned uid) {
    return std::string("   0: ") + local + " 00000000:0000 " + st +
           " 00000000:00000000 00:00000000 00000000  " + std::to_string(uid) +
           "        0 12345 1 0000000000000000 100 0 0 10 0\n";
}

}  // namespace

START_TEST(v4_loopback_and_wildcard) {
    // 127.0.0.1:8080 (0x1F90) of uid 1000, listening.
    std::string t = std::string(kHeader) + line("0100007F:1F90", "0A", 1000);
    auto l = find_listener(t, false, 8080, 1000);
    ck_assert(l.has_value());
    ck_assert_str_eq(l->connect_to.c_str(), "127.0.0.1");
    ck_assert(!l->v6);
    // 0.0.0.0:80: dialled on loopback.
    t = std::string(kHeader) + line("00000000:0050", "0A", 1000);
    l = find_listener(t, false, 80, 1000);
    ck_assert(l && l->connect_to == "127.0.0.1");
    // 10.1.2.3:80 (bytes 0A 01 02 03 printed as 0302010A).
    t = std::string(kHeader) + line("0302010A:0050", "0A", 1000);
    l = find_listener(t, false, 80, 1000);
    ck_assert(l && l->connect_to == "10.1.2.3");
}
END_TEST

START_TEST(owner_state_and_port_must_match) {
    std::string t = std::string(kHeader) + line("0100007F:1F90", "0A", 0) +  // root's
                    line("0100007F:1F90", "01", 1000) +                      // established
                    line("0100007F:1F91", "0A", 1000);                       // another port
    ck_assert(!find_listener(t, false, 8080, 1000).has_value());
    ck_assert(find_listener(t, false, 8080, 0).has_value());
    ck_assert(find_listener(t, false, 8081, 1000).has_value());
    // The header line is never an entry; malformed lines are skipped.
    ck_assert(!find_listener(kHeader, false, 0, 0).has_value());
    std::string bad = std::string(kHeader) + "   0: zz:1F90 x 0A\n" + "garbage\n\n" +
                      line("0100007F:1F90", "0A", 1000);
    ck_assert(find_listener(bad, false, 8080, 1000).has_value());
    ck_assert(!find_listener("", false, 8080, 1000).has_value());
}
END_TEST

START_TEST(v6) {
    std::string t = std::string(kHeader) +
                    line("00000000000000000000000001000000:1F90", "0A", 1000) +  // ::1
                    line("00000000000000000000000000000000:0050", "0A", 1000);   // ::
    auto l = find_listener(t, true, 8080, 1000);
    ck_assert(l && l->v6 && l->connect_to == "::1");
    l = find_listener(t, true, 80, 1000);
    ck_assert(l && l->connect_to == "::1");
    // A v4-length address in the v6 table is malformed.
    ck_assert(
        !find_listener(std::string(kHeader) + line("0100007F:1F90", "0A", 1000), true, 8080, 1000)
             .has_value());
}
END_TEST

int main() {
    Suite *s = suite_create("tcp_listeners");
    TCase *tc = tcase_create("find_listener");
    tcase_add_test(tc, v4_loopback_and_wildcard);
    tcase_add_test(tc, owner_state_and_port_must_match);
    tcase_add_test(tc, v6);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
