// Issue 13 R1/C2/M3-M5 at the reader and writer, and issue 9 item 5/11 (structured Error, no throw).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/io/io_test_util.h"
#include "nmkit/safetensors.h"
#include "nmkit/status.h"

namespace nmkit {
namespace {

std::string open_error(const test::TempDir& dir, const std::string& header) {
  const std::string path = dir.file("model.safetensors");
  test::write_bytes(path, test::hand_file(header, {}));
  auto file = SafetensorsFile::open(path);
  EXPECT_FALSE(file.ok());
  if (file.ok()) return "";
  const std::string& message = file.error().message();
  EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_LT(message.size(), 600u) << message;
  return message;
}

// R1: nesting past serde_json's 128 levels is refused by the streaming pass, before any DOM is built.
TEST(HeaderLimits, DeepNestingIsRefused) {
  test::TempDir dir;
  const std::string deep = "{\"__metadata__\":{\"x\":" + std::string(200, '[') + std::string(200, ']') + "}}";
  const std::string message = open_error(dir, deep);
  EXPECT_NE(message.find("nesting deeper than 128"), std::string::npos) << message;
  // 127 levels inside the top object are fine as JSON (the entry is then refused for its content).
  const std::string ok_depth = "{\"t\":{\"x\":" + std::string(120, '[') + std::string(120, ']') + "}}";
  EXPECT_EQ(open_error(dir, ok_depth).find("nesting"), std::string::npos);
}

// R1: more tensors than the cap, refused with the count (empty U8 tensors keep the file small).
TEST(HeaderLimits, TooManyTensorsAreRefused) {
  test::TempDir dir;
  std::string header = "{";
  for (int i = 0; i <= 200'000; ++i) {
    if (i > 0) header += ',';
    header += "\"t" + std::to_string(i) + "\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}";
  }
  header += '}';
  const std::string message = open_error(dir, header);
  EXPECT_NE(message.find("more than 200000 tensors"), std::string::npos) << message;
}

// C2: a tensor name beyond 4096 bytes is refused by the reader, with a short message.
TEST(HeaderLimits, LongNamesAreRefused) {
  test::TempDir dir;
  const std::string name(50'000, 'a');
  const std::string message =
      open_error(dir, "{\"" + name + "\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}");
  EXPECT_NE(message.find("50000 bytes exceeds the limit of 4096"), std::string::npos) << message;
}

// M5: a tensor named "" reads and writes back (it used to be refused only by the writer, so prune
// blamed its output file for the input's name).
TEST(HeaderLimits, EmptyNameRoundTrips) {
  test::TempDir dir;
  OutputTensor t = OutputTensor::owning("", Tensor::from_f32(std::vector<float>{1, 2}, {2}));
  ASSERT_TRUE(write_safetensors(dir.file("a.safetensors"), {t}).ok());
  auto file = SafetensorsFile::open(dir.file("a.safetensors"));
  ASSERT_TRUE(file.ok()) << file.error().message();
  ASSERT_EQ(file->tensors().size(), 1u);
  EXPECT_EQ(file->tensors()[0].name, "");
}

// M3/M4: one helper shows names: control characters escaped, long names cut, UTF-8 kept whole.
TEST(DisplayName, EscapesAndTruncates) {
  EXPECT_EQ(display_name("a\nb\x1b[31m\x7f"), "a\\x0Ab\\x1B[31m\\x7F");
  EXPECT_EQ(quote_name(""), "''");
  const std::string shown = display_name(std::string(10'000'000, 'x'));
  EXPECT_EQ(shown, std::string(200, 'x') + "...");
  const std::string utf8 = display_name(std::string(199, 'x') + "\xC3\xA9" + "tail");
  EXPECT_EQ(utf8, std::string(199, 'x') + "...");
}

// Item 5: the message is formatted from the fields, in one order; Error(std::string) still works.
TEST(StructuredError, FormatsItsFields) {
  const Error e = Error(ErrorCode::InvalidValue, "is nan")
                      .with_tensor("w\n")
                      .with_operand("gradient")
                      .with_row(3)
                      .with_column(7)
                      .with_file("g.safetensors");
  EXPECT_EQ(e.message(), "g.safetensors: tensor 'w\\x0A': gradient at row 3, column 7 is nan");
  EXPECT_EQ(e.code(), ErrorCode::InvalidValue);
  EXPECT_EQ(e.operand(), "gradient");
  EXPECT_EQ(e.row(), 3);
  const Error plain("in.safetensors: bad header");
  EXPECT_EQ(plain.code(), ErrorCode::Unspecified);
  EXPECT_EQ(plain.in_file("in.safetensors").message(), "in.safetensors: bad header");  // not twice
  EXPECT_EQ(plain.in_file("other").message(), "other: in.safetensors: bad header");
  EXPECT_EQ(Error("x").with_context("--pattern: ").message(), "--pattern: x");
  EXPECT_EQ(Error(ErrorCode::NotFound, "missing").with_value("'a'").message(), "missing 'a'");
}

// Item 11: value() of a failed Result is a caller bug caught by an assertion (no exception).
TEST(StructuredErrorDeathTest, ValueOfAnErrorAsserts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Result<int> failed = Error("nope");
  EXPECT_DEATH({ (void)failed.value(); }, "internal error: ok\\(\\)");
  const Status fine;
  EXPECT_DEATH({ (void)fine.error(); }, "internal error");
}

}  // namespace
}  // namespace nmkit
