#include <gtest/gtest.h>

#include "nmkit/format.h"

namespace nmkit {
namespace {

TEST(Compliance, Placeholder) { SUCCEED(); }

}  // namespace
}  // namespace nmkit
