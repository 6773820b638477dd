// apply_chat_template against outputs written out by hand from SmolLM2's Jinja template (copied
// below from the GGUF's tokenizer.chat_template).
#include <gtest/gtest.h>

#include "nmkit/tokenizer.h"

namespace nmkit {
namespace {

const std::string kSmolLM2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

TEST(ChatTemplate, SmolLM2AddsItsDefaultSystemMessage) {
  const std::vector<ChatMessage> messages = {{"user", "What is 2+2?"}};
  auto text = apply_chat_template(kSmolLM2Template, messages, true);
  ASSERT_TRUE(text.ok()) << text.error().message();
  EXPECT_EQ(text.value(),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, GivenSystemMessageReplacesTheDefault) {
  const std::vector<ChatMessage> messages = {
      {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}};
  auto text = apply_chat_template(kSmolLM2Template, messages, false);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text.value(),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n");
}

TEST(ChatTemplate, EscapedNewlinesInTheSourceAndNoDefault) {
  // A ChatML template without a default system message, its newlines written as escapes.
  const std::string source =
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
  const std::vector<ChatMessage> messages = {{"user", "x"}};
  auto text = apply_chat_template(source, messages, true);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text.value(), "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, OtherTemplatesAndRolesAreErrors) {
  const std::vector<ChatMessage> messages = {{"user", "x"}};
  auto llama3 = apply_chat_template("{{ '<|start_header_id|>' }}", messages, true);
  ASSERT_FALSE(llama3.ok());
  EXPECT_NE(llama3.error().message().find("supported: ChatML"), std::string::npos);
  EXPECT_FALSE(apply_chat_template("", messages, true).ok());
  const std::vector<ChatMessage> bad = {{"tool", "x"}};
  EXPECT_FALSE(apply_chat_template(kSmolLM2Template, bad, true).ok());
}

}  // namespace
}  // namespace nmkit
