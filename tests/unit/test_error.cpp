#include <catch2/catch.hpp>

#include "frugal/util/error.h"

TEST_CASE("located() formats file:line:column", "[unit]") {
  CHECK(frugal::located("a.yaml", 3, 7, "bad") == "a.yaml:3:7: bad");
  CHECK(frugal::located("a.yaml", 0, 0, "bad") == "a.yaml: bad");
  CHECK(frugal::located("", 2, 0, "bad") == "<config>:2: bad");
}
