// `orchard make-model`: writes a built-in model shape with seeded random weights.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/progress.h"
#include "model/synthetic/synthetic.h"

namespace orchard::cli {

void register_make_model(CLI::App& app) {
  struct Opts {
    std::string shape = "tiny", type = "Q8_0", out;
    uint64_t seed = 42;
  };
  auto o = std::make_shared<Opts>();
  std::string shapes;
  for (const auto& s : model_shapes()) shapes += "\n  " + s.name + ": " + s.description;
  auto* cmd = app.add_subcommand(
      "make-model",
      "Write a GGUF model of a built-in shape with seeded random weights and a generated "
      "vocabulary (for demos and benchmarks; its text is meaningless). Shapes:" + shapes);
  cmd->add_option("--shape", o->shape, "Model shape")->capture_default_str();
  cmd->add_option("--type", o->type,
                  "Weight format: " + file_type_names() +
                      " (a plain type puts every matrix in it; the K-quant _M/_S mixtures assign formats as "
                      "llama-quantize does, e.g. Q6_K output and some ffn_down)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Random seed (same seed, same file)")->capture_default_str();
  cmd->add_option("-o,--output", o->out, "Output file")->required();
  cmd->callback([o] {
    const ModelShape& shape = model_shape(o->shape);
    const FileType type = parse_file_type(o->type);
    ProgressBar bar("make-model " + shape.name + " " + type.name);
    write_synthetic_model(shape, type, o->seed, o->out,
                          [&](int64_t d, int64_t t) { bar.update(d, t); });
    std::printf("wrote %s: shape %s (%s), %s, seed %llu\n", o->out.c_str(), shape.name.c_str(),
                shape.description.c_str(), type.name.c_str(), static_cast<unsigned long long>(o->seed));
    std::printf("note: the weights are random, so text generated with this model is meaningless.\n");
  });
}

}  // namespace orchard::cli
