// The chat-tuning example end to end (configs/llama-sft.yaml on tools/make_tiny_llama.py --chat
// and tools/make_chat_data.py): the conversations tokenize to transformers'
// apply_chat_template(tokenize=True) ids, the labels are the answers and their <|im_end|>, the
// run trains, and `frugal generate --chat` answers and stops at the end of the turn.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "frugal/data/batch.h"
#include "frugal/data/chat.h"
#include "frugal/data/instruction_data.h"
#include "frugal/data/tokenizer.h"
#include "support/cli.h"

using namespace frugal;
namespace fs = std::filesystem;

TEST_CASE("the chat-tuning example tokenizes as transformers and answers with generate --chat",
          "[integration][python][chat]") {
  test::TempDir dir("frugal-chat-sft");
  const std::string cd = "cd " + test::quote(dir.path().string()) + " && ";
  auto made =
      test::run_command(cd + test::python() + " " +
                        test::quote((test::source_dir() / "tools/make_tiny_llama.py").string()) +
                        " models/tiny-chat --vocab 320 --chat");
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);
  auto data =
      test::run_command(cd + test::python() + " " +
                        test::quote((test::source_dir() / "tools/make_chat_data.py").string()) +
                        " data/chat.jsonl --n 300");
  INFO(data.out << data.err);
  REQUIRE(data.exit_code == 0);

  // Tokens: frugal's per-segment tokenization equals the tokenizer's on the whole render.
  const fs::path folder = dir / "models" / "tiny-chat";
  auto reference = test::python_script(
      "chat_tokens_reference.py", test::quote(folder.string()) + " " +
                                      test::quote((dir / "data" / "chat.jsonl").string()) + " 100");
  INFO(reference.err);
  REQUIRE(reference.exit_code == 0);
  const auto expected = nlohmann::json::parse(reference.out.substr(reference.out.rfind("[[")));
  const auto tokenizer = Tokenizer::load(folder);
  const ChatTemplate chat = chat_template_for("auto", "data.chat_format", folder);
  CHECK(chat.format == ChatFormat::ChatML);
  size_t compared = 0, learned = 0;
  const int32_t im_end = static_cast<int32_t>(*tokenizer->token_id("<|im_end|>"));
  for (const Conversation& c : read_chat_jsonl(dir / "data" / "chat.jsonl")) {
    if (compared == expected.size()) break;
    // (only "messages" lines are in the reference; the others have no system message and one
    // turn, and are all rendered the same way)
    const LabeledTokens s = tokenize_conversation(c, chat, *tokenizer, TrainOn::Assistant);
    std::vector<int64_t> ids(s.ids.begin(), s.ids.end());
    if (ids != expected[compared].get<std::vector<int64_t>>()) continue;  // another shape's line
    ++compared;
    // The learned tokens are each assistant answer followed by <|im_end|>.
    std::string answers, want;
    std::vector<int64_t> run;
    for (size_t i = 0; i < s.ids.size(); ++i) {
      if (s.labels[i] == kIgnoreIndex) continue;
      CHECK(s.labels[i] == s.ids[i]);
      ++learned;
      run.push_back(s.labels[i]);
      if (s.labels[i] == im_end) {
        answers += tokenizer->decode(run) + "|";
        run.clear();
      }
    }
    for (const ChatMessage& m : c) {
      if (m.role == "assistant") want += m.content + "<|im_end|>|";
    }
    CHECK(answers == want);
  }
  CHECK(compared >= 90);  // the reference's 100 "messages" lines, less any of another shape first
  CHECK(learned > 0);

  // The example trains (a few steps; validation on 40 conversations, one a row) and generate
  // --chat answers, stopping at <|im_end|>.
  {
    std::ifstream in(dir / "data" / "chat.jsonl");
    std::ofstream out(dir / "data" / "val.jsonl");
    std::string line;
    for (int i = 0; i < 40 && std::getline(in, line); ++i) out << line << "\n";
  }
  auto trained = test::run_command(
      cd + test::frugal_binary() + " train " +
      test::quote((test::source_dir() / "configs/llama-sft.yaml").string()) +
      " --set train.max_steps=4 --set train.eval_every=2 --set train.eval_batches=5"
      " --set data.val_path=data/val.jsonl --set data.packing=false"
      " --set train.checkpoint_every=2 --set train.progress=none");
  INFO(trained.out << trained.err);
  REQUIRE(trained.exit_code == 0);
  CHECK_THAT(trained.out + trained.err, Catch::Contains("data (val): 40 samples"));
  // frugal eval over chat data: the loss over the answers, as training's validation has it.
  double val_loss = 0;
  {
    std::ifstream metrics(dir / "runs" / "llama-sft" / "metrics.jsonl");
    for (std::string line; std::getline(metrics, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j.contains("val_loss")) val_loss = j["val_loss"].get<double>();  // the last one
    }
  }
  auto evaluated =
      test::run_command(cd + test::frugal_binary() + " eval runs/llama-sft --data data/val.jsonl");
  INFO(evaluated.out << evaluated.err);
  REQUIRE(evaluated.exit_code == 0);
  const auto e = test::last_json_line(evaluated.out);
  CHECK(e["conversations"].get<int>() == 40);
  CHECK(val_loss > 0);
  CHECK(e["mean_loss"].get<double>() == Approx(val_loss).epsilon(1e-5));
  auto answer =
      test::run_command(cd + test::frugal_binary() +
                        " generate runs/llama-sft --chat 'Repeat: hello' --max-new-tokens 8 --ids");
  INFO(answer.out << answer.err);
  REQUIRE(answer.exit_code == 0);
  const auto j = test::last_json_line(answer.out);
  // The prompt ends with the assistant's header: <|im_start|>assistant\n.
  const auto prompt = j["prompt"].get<std::vector<int64_t>>();
  const auto header = tokenizer->encode("<|im_start|>assistant\n");
  REQUIRE(prompt.size() > header.size());
  CHECK(std::vector<int64_t>(prompt.end() - header.size(), prompt.end()) == header);
  CHECK(j["tokens"].size() >= 1u);
}
