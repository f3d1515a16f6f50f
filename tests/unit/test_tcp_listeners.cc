// common/daemons/tcp_listeners: the listener a port-forward may reach, from the text
// of /proc/net/tcp and /proc/net/tcp6 (lines as the kernel prints them).
#include <check.h>

#include <string>

#include "common/daemons/tcp_listeners.h"
#include "tests/unit/check_main.h"

using namespace sk;

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

// The socket that takes a probe's connection, as the kernel picks it: the
// very address first, then the family's wildcard, then a dual-stack ::; the
// probe vouches for it only when it is the job user's.
START_TEST(accepting_listener_picks_as_the_kernel) {
    // 10.1.2.3 (0302010A) of uid 2000 (an intruder) and 0.0.0.0 of uid 1000.
    std::string t4 = std::string(kHeader) + line("00000000:1F90", "0A", 1000) +
                     line("0302010A:1F90", "0A", 2000) + line("0100007F:1F91", "0A", 3000);
    std::string t6 = std::string(kHeader) +
                     line("00000000000000000000000000000000:1F92", "0A", 4000) +  // ::
                     line("0000000000000000FFFF00000302010A:1F93", "0A", 5000);   // mapped
    auto l = accepting_listener(t4, t6, "10.1.2.3", 8080);
    ck_assert(l && l->uid == 2000 && l->bound == "10.1.2.3");
    l = accepting_listener(t4, t6, "127.0.0.1", 8080);  // only the wildcard takes it
    ck_assert(l && l->uid == 1000 && l->bound == "0.0.0.0");
    l = accepting_listener(t4, t6, "10.1.2.3", 8081);  // 127.0.0.1 only: nobody there
    ck_assert(!l.has_value());
    l = accepting_listener(t4, t6, "10.1.2.3", 8082);  // a dual-stack ::
    ck_assert(l && l->uid == 4000 && l->bound == "::");
    l = accepting_listener(t4, t6, "10.1.2.3", 8083);  // bound to ::ffff:10.1.2.3
    ck_assert(l && l->uid == 5000);
    l = accepting_listener(t4, t6, "::1", 8082);  // v6: the wildcard of its family
    ck_assert(l && l->uid == 4000);
    ck_assert(!accepting_listener(t4, t6, "not-an-ip", 8080).has_value());
    // Not listening (established) does not count.
    ck_assert(!accepting_listener(std::string(kHeader) + line("0302010A:1F90", "01", 2000), "",
                                  "10.1.2.3", 8080)
                   .has_value());
}
END_TEST

int main() {
    Suite *s = suite_create("tcp_listeners");
    TCase *tc = tcase_create("find_listener");
    tcase_add_test(tc, v4_loopback_and_wildcard);
    tcase_add_test(tc, owner_state_and_port_must_match);
    tcase_add_test(tc, v6);
    tcase_add_test(tc, accepting_listener_picks_as_the_kernel);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
