// apply_chat_template: ChatML (the "<|im_start|>" family, SmolLM2's) rendered directly rather
// than by a Jinja interpreter; any other template is refused by name (see tokenizer.h).
#include "nmkit/tokenizer.h"

namespace nmkit {

Result<std::string> apply_chat_template(std::string_view chat_template,
                                        std::span<const ChatMessage> messages,
                                        bool add_generation_prompt) {
  if (chat_template.empty()) {
    return Error("the model has no chat template (tokenizer.chat_template); supported: ChatML "
                 "(<|im_start|>role ... <|im_end|>)");
  }
  if (chat_template.find("<|im_start|>") == std::string_view::npos) {
    return Error("unsupported chat template (supported: ChatML, <|im_start|>role ... "
                 "<|im_end|>): " + std::string(chat_template.substr(0, 80)) +
                 (chat_template.size() > 80 ? "..." : ""));
  }
  for (const ChatMessage& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant") {
      return Error("chat message role '" + m.role + "' is not system, user or assistant");
    }
  }
  // The template's default system message, e.g. SmolLM2's "You are a helpful AI assistant named
  // SmolLM, trained by Hugging Face", used when the conversation does not start with one.
  // The Jinja source may hold the newline itself or its escape (backslash, n).
  std::string default_system;
  for (const std::string_view newline : {std::string_view("\n"), std::string_view("\\n")}) {
    const std::string system_start = "<|im_start|>system" + std::string(newline);
    const size_t at = chat_template.find(system_start);
    if (at == std::string_view::npos) continue;
    const size_t begin = at + system_start.size();
    const size_t end = chat_template.find("<|im_end|>", begin);
    if (end == std::string_view::npos) continue;
    const std::string_view text = chat_template.substr(begin, end - begin);
    for (size_t i = 0; i < text.size(); ++i) {
      if (newline.size() == 2 && text.compare(i, 2, "\\n") == 0) {
        default_system += '\n';
        ++i;
      } else {
        default_system += text[i];
      }
    }
    break;
  }
  std::string out;
  // As SmolLM2's template: the default system message goes before the first message (none for
  // an empty conversation).
  if (!default_system.empty() && !messages.empty() && messages.front().role != "system") {
    out += "<|im_start|>system\n" + default_system + "<|im_end|>\n";
  }
  for (const ChatMessage& m : messages) {
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace nmkit
