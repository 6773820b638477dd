#include <gtest/gtest.h>

#include "nmkit/pattern.h"

namespace nmkit {
namespace {

TEST(Pattern, ParsesValidPatterns) {
  for (auto [text, keep, group] : {std::tuple{"2:4", 2, 4}, {"6:8", 6, 8}, {"1:2", 1, 2},
                                   {"63:64", 63, 64}, {"3:7", 3, 7}}) {
    auto p = Pattern::parse(text);
    ASSERT_TRUE(p.ok()) << text;
    EXPECT_EQ(p->keep, keep);
    EXPECT_EQ(p->group, group);
    EXPECT_EQ(p->str(), text);
  }
}

TEST(Pattern, RejectsBadPatternsWithMessageQuotingText) {
  for (const char* text : {"4:2", "0:4", "2:0", "2:4:8", "abc", "", ":", "2:", ":4", "4:4", "2:65",
                           "-1:4", "2:+4", " 2:4", "2:4 ", "1000:2000"}) {
    auto p = Pattern::parse(text);
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_NE(p.error().message().find(std::string("'") + text + "'"), std::string::npos)
        << p.error().message();
  }
}

TEST(Pattern, GroupsAndSlidability) {
  const Pattern p{6, 8};
  EXPECT_EQ(p.groups(1), 1);
  EXPECT_EQ(p.groups(8), 1);
  EXPECT_EQ(p.groups(17), 3);
  EXPECT_EQ(p.padded(17), 24);
  EXPECT_TRUE(p.slidable());
  EXPECT_EQ(p.N(), 4);
  EXPECT_TRUE((Pattern{2, 4}.slidable()));
  EXPECT_FALSE((Pattern{7, 8}.slidable()));
  EXPECT_FALSE((Pattern{3, 7}.slidable()));
}

}  // namespace
}  // namespace nmkit
