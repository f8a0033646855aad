// SPDX-License-Identifier: BSD-3-Clause
/// @file predict: run a trained model (a model file, or a training checkpoint) on a data set and
/// write one CSV row per sample; print the accuracy (classification) or the RMSE (regression).
///
/// predict --model FILE --data fashion-mnist|synthetic|DIR|FILE.csv|FILE.idx [--targets FILE.idx]
///         [--output FILE.csv]
///         [--backend serial|openmp|threads] [--threads N] [--save-model OUT [--format F]]
///
/// The outputs are the bits training's forward pass computes (reprosgd::Inference), the same for
/// every --threads and --backend; floats are printed in their shortest round-trip form. On an
/// error: one line on standard error and the exit codes of train_mlp (2 usage/configuration,
/// 3 data, 4 numerics, 5 I/O, 6 model file/checkpoint, 1 anything else).
#include "../exit_code.hpp"

#include <reprosgd/checkpoint/float_text.hpp>
#include <reprosgd/checkpoint/formats.hpp>
#include <reprosgd/data/csv_reader.hpp>
#include <reprosgd/data/fashion_mnist.hpp>
#include <reprosgd/data/idx_reader.hpp>
#include <reprosgd/data/synthetic.hpp>
#include <reprosgd/detail/kokkos_compat.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/inference/architecture.hpp>
#include <reprosgd/inference/model_file.hpp>
#include <reprosgd/inference/predict.hpp>
#include <reprosgd/math/fp_environment.hpp>

#include <CLI/CLI.hpp>

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace predict_app {

struct Config {
  std::string model;
  std::string data;
  std::string targets;  // --targets FILE: IDX float targets of --data's IDX features
  std::string split = "test";
  long samples = 0;
  std::string output;
  std::string backend = "default";
  int threads = 0;
  long batch = 1024;
  std::uint64_t seed = 42;
  long synthetic_train = 12000;
  long synthetic_test = 2000;
  std::string save_model;
  std::string format = "portable";
  bool quiet = false;
};

using HostMatrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;

/// The samples to predict: features, and the labels or regression targets when the data has them.
struct Samples {
  HostMatrix x;
  std::vector<int> labels;  // classification: one per sample, or empty
  HostMatrix targets;       // regression: one row per sample, or empty
};

using reprosgd_apps::exit_code;  // the same exit codes as train_mlp (../exit_code.hpp)
const char* without_prefix(const char* what) {
  const char prefix[] = "predict: ";
  return std::strncmp(what, prefix, sizeof prefix - 1) == 0 ? what + sizeof prefix - 1 : what;
}

/**
 * A CSV of numbers, one sample per line (a first line that is not all numbers is a header), with
 * `in` features first and then: nothing; a class label in [0, out) (classification, as train_mlp
 * reads CSV); or `out` target values (regression, as train_mlp --loss mse reads CSV). A row of in + 1
 * numbers is a label unless the model has one output or output normalisation (`regression`): those
 * are regression models, whose row of in + out numbers ends with the targets.
 */
Samples read_csv(const std::string& path, int in, int out, bool regression) {
  using namespace reprosgd;
  std::ifstream f(path);
  if (!f) throw io_error("predict: " + path + ": cannot open for reading");
  std::vector<float> xs, ts;
  std::vector<int> labels;
  std::vector<std::string_view> fields;
  std::string line;
  long line_no = 0, rows = 0;
  int width = -1;
  const auto fail = [&](const std::string& what) -> void {
    throw data_error("predict: " + path + ", line " + std::to_string(line_no) + ": " + what);
  };
  while (std::getline(f, line)) {
    ++line_no;
    if (detail::trim(line).empty()) continue;
    detail::split_fields(line, ',', fields);
    std::vector<float> values(fields.size());
    bool numbers = true;
    for (std::size_t k = 0; k < fields.size(); ++k)
      if (detail::parse_float(fields[k], values[k]) != detail::FloatParse::ok) numbers = false;
    if (!numbers && rows == 0 && width < 0) {
      width = static_cast<int>(fields.size());  // the header
      continue;
    }
    if (!numbers) fail("a field is not a number");
    const int n = static_cast<int>(fields.size());
    const bool labelled = !regression && out > 1;  // in + 1 numbers: features, then the class label
    if (n != in && n != in + out && !(labelled && n == in + 1))
      fail(std::to_string(n) + " columns; the model has " + std::to_string(in) + " inputs and " + std::to_string(out) +
           " outputs, so a row has " + std::to_string(in) + " (features)" +
           (labelled ? ", " + std::to_string(in + 1) + " (features, then the class label)" : std::string()) + " or " +
           std::to_string(in + out) + " (features, then the targets)");
    const bool targets = n == in + out;  // (labelled means out > 1: in + out is not in + 1)
    if (rows > 0 && (n > in) != (!labels.empty() || !ts.empty())) fail("rows with and without labels or targets");
    if (rows > 0 && n > in && targets != !ts.empty()) fail("rows with labels and rows with targets");
    for (int j = 0; j < in; ++j) xs.push_back(values[static_cast<std::size_t>(j)]);
    if (n > in && targets)
      for (int j = 0; j < out; ++j) ts.push_back(values[static_cast<std::size_t>(in + j)]);
    if (n > in && !targets) {
      const float v = values[static_cast<std::size_t>(in)];
      if (!(v >= 0.0f && v < static_cast<float>(out)) || v != std::floor(v))
        fail("label " + exact_float_text(v) + " is not a class in [0, " + std::to_string(out) + ")");
      labels.push_back(static_cast<int>(v));
    }
    ++rows;
  }
  if (rows == 0) throw data_error("predict: " + path + ": no samples");
  Samples s;
  s.x = HostMatrix("predict::x", rows, in);
  std::memcpy(s.x.data(), xs.data(), xs.size() * sizeof(float));
  s.labels = std::move(labels);
  if (!ts.empty()) {
    s.targets = HostMatrix("predict::targets", rows, out);
    std::memcpy(s.targets.data(), ts.data(), ts.size() * sizeof(float));
  }
  return s;
}

/// --data as train_mlp reads it (Fashion-MNIST falls back to the synthetic set when absent, as
/// train_mlp's does), the --split set, its first --samples rows.
Samples load(const Config& c, int in, int out, bool regression) {
  using namespace reprosgd;
  const bool csv = c.data.size() > 4 && c.data.compare(c.data.size() - 4, 4, ".csv") == 0;
  if (csv) return read_csv(c.data, in, out, regression);
  struct stat st {};
  if (!c.targets.empty() || (::stat(c.data.c_str(), &st) == 0 && S_ISREG(st.st_mode))) {
    // IDX features (a file, not a folder of Fashion-MNIST files), with or without their targets.
    Dataset<Kokkos::HostSpace> d;
    if (c.targets.empty())
      d.features = read_idx_features(c.data);
    else
      d = read_idx_regression_dataset(c.data, c.targets);
    validate_finite(d);  // NaN or Inf: named, not predicted on
    Samples s;
    s.x = d.features;
    if (c.targets.empty()) return s;
    if (static_cast<int>(d.target_count()) != out)
      throw data_error("predict: " + c.targets + " holds " + std::to_string(d.target_count()) +
                       " targets per sample, the model has " + std::to_string(out) + " outputs");
    s.x = d.features;
    s.targets = d.targets;
    return s;
  }
  if (c.split != "test" && c.split != "train") throw config_error("predict: --split must be test or train");
  TrainTest<Kokkos::HostSpace> d;
  if (c.data == "synthetic" || (c.data == "fashion-mnist" && !fashion_mnist_available())) {
    if (c.data != "synthetic" && !c.quiet)
      std::printf("Fashion-MNIST not found in %s: using the built-in synthetic data set\n", default_fashion_mnist_dir);
    d = make_synthetic_train_test(c.seed, static_cast<std::size_t>(c.synthetic_train),
                                  static_cast<std::size_t>(c.synthetic_test), 784, 10, {.separation = 0.2f});
  } else {
    d = load_fashion_mnist(c.data == "fashion-mnist" ? std::string(default_fashion_mnist_dir) : c.data);
  }
  const Dataset<Kokkos::HostSpace>& ds = c.split == "test" ? d.test : d.train;
  long n = static_cast<long>(ds.size());
  if (c.samples > 0 && c.samples < n) n = c.samples;
  Samples s;
  s.x = HostMatrix("predict::x", n, ds.feature_count());
  Kokkos::deep_copy(s.x, Kokkos::subview(ds.features, std::make_pair(0L, n), Kokkos::ALL()));
  for (long i = 0; i < n; ++i) s.labels.push_back(ds.labels(i));
  return s;
}

template <class Space, class Model>
int run_on(const Config& c, const Model& model, const reprosgd::Normalization& norm, const Samples& s) {
  using namespace reprosgd;
  const long n = static_cast<long>(s.x.extent(0));
  const int out = model.output_width();
  if (static_cast<int>(s.x.extent(1)) != model.input_width())
    throw config_error("predict: the data has " + std::to_string(s.x.extent(1)) + " features, the model expects " +
                       std::to_string(model.input_width()));
  const Space space;
  if (!c.quiet)
    std::printf("predict: %ld samples, %zu parameters, backend %s with %d threads\n", n, model.parameter_count(),
                Space::name(), detail::concurrency(space));
  // The data where the backend computes (the same Views on a host backend: no copy).
  using Mem = typename Space::memory_space;
  const auto x = Kokkos::create_mirror_view_and_copy(Mem(), s.x);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> y_dev("predict::y", n, out);
  Kokkos::View<int*, Mem> classes_dev("predict::classes", n);
  Inference<Model, Space> inference(model, norm, {.batch = c.batch, .grow = false});
  inference.predict(space, x, y_dev);
  predicted_classes(space, y_dev, classes_dev);
  space.fence();
  const auto y = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), y_dev);
  const auto classes = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), classes_dev);
  const bool regression = norm.has_outputs() || s.targets.extent(0) > 0;
  if (!c.output.empty()) {
    std::string text = regression ? "sample" : "sample,class";
    for (int j = 0; j < out; ++j) text += ",output_" + std::to_string(j);
    text += '\n';
    for (long i = 0; i < n; ++i) {
      text += std::to_string(i);
      if (!regression) text += "," + std::to_string(classes(i));
      for (int j = 0; j < out; ++j) text += "," + exact_float_text(y(i, j));
      text += '\n';
    }
    write_file_atomically(c.output, std::as_bytes(std::span<const char>(text.data(), text.size())));
  }
  if (!s.labels.empty()) {
    // Correct predictions counted as the training's evaluation counts them (the first maximum).
    long correct = 0;
    for (long i = 0; i < n; ++i) correct += classes(i) == s.labels[static_cast<std::size_t>(i)] ? 1 : 0;
    std::printf("accuracy %.4f (%ld of %ld)\n", static_cast<double>(correct) / static_cast<double>(n), correct, n);
  }
  if (s.targets.extent(0) > 0) {
    // The root of the mean squared error over every output of every sample, summed in double in
    // sample order, outputs ascending.
    double sum = 0.0;
    for (long i = 0; i < n; ++i)
      for (int j = 0; j < out; ++j) {
        const double d = static_cast<double>(y(i, j)) - static_cast<double>(s.targets(i, j));
        sum += d * d;
      }
    std::printf("rmse %s\n", exact_float_text(std::sqrt(sum / static_cast<double>(n * out))).c_str());
  }
  if (!c.output.empty() && !c.quiet) std::printf("outputs written to %s\n", c.output.c_str());
  return 0;
}

// The model built where Space computes (with_mlp in Space's memory), loaded, run.
template <class Space>
int run_model(const Config& c, const reprosgd::ModelArchitecture& arch, const reprosgd::ModelFile& file) {
  using namespace reprosgd;
  return with_mlp<typename Space::memory_space>(arch, [&](auto model) {
    const Normalization norm = load_model(file, model);
    const Samples s = load(c, model.input_width(), model.output_width(), norm.has_outputs());
    return run_on<Space>(c, model, norm, s);
  });
}

int run_backend(const Config& c, const reprosgd::ModelArchitecture& arch, const reprosgd::ModelFile& file) {
  using namespace reprosgd;
#if defined(KOKKOS_ENABLE_SERIAL)
  if (c.backend == "serial") return run_model<Kokkos::Serial>(c, arch, file);
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
  if (c.backend == "openmp" || c.backend == "default") return run_model<Kokkos::OpenMP>(c, arch, file);
#endif
#if defined(KOKKOS_ENABLE_THREADS)
  if (c.backend == "threads" || c.backend == "default") return run_model<Kokkos::Threads>(c, arch, file);
#endif
#if defined(KOKKOS_ENABLE_CUDA)
  if (c.backend == "cuda") return run_model<Kokkos::Cuda>(c, arch, file);
#endif
  throw config_error("predict: --backend " + c.backend + " is not enabled in this Kokkos build (it has " +
                     detail::enabled_backends() + ")");
}

int run(const Config& c) {
  using namespace reprosgd;
  check_fp_environment();
  if (c.data.empty() && c.save_model.empty()) throw config_error("predict: give --data (and --output), or --save-model");
  if (c.batch < 1) throw config_error("predict: --batch must be at least 1");
  const ModelFile file = read_model(c.model);
  if (!c.save_model.empty()) {
    if (c.format == "json")
      write_model_file<JsonFormat>(c.save_model, file);
    else if (c.format == "binary")
      write_model_file<BinaryFormat>(c.save_model, file);
    else
      write_model_file<PortableBinaryFormat>(c.save_model, file);
    if (!c.quiet) std::printf("model saved to %s\n", c.save_model.c_str());
  }
  if (c.data.empty()) return 0;
  const ModelArchitecture arch = ModelArchitecture::parse(file.layers, "predict: " + c.model);
  return run_backend(c, arch, file);
}

}  // namespace predict_app

using namespace predict_app;

int main(int argc, char** argv) {
  Config c;
  CLI::App app{"Run a trained ReproSGD model (a model file or a training checkpoint) on a data set."};
  app.add_option("--model", c.model, "model file (train_mlp --save-model) or training checkpoint")->required();
  app.add_option("--data", c.data, "fashion-mnist | synthetic | DIR with IDX files | FILE.csv | FILE (IDX features)");
  app.add_option("--targets", c.targets, "with --data FILE (IDX features): the IDX file of their float targets; RMSE printed");
  app.add_option("--split", c.split, "fashion-mnist, synthetic, DIR: test (default) or train")
      ->check(CLI::IsMember({"test", "train"}));
  app.add_option("--samples", c.samples, "use only the first N samples");
  app.add_option("--output", c.output, "write one CSV row per sample: sample, class, outputs");
  app.add_option("--backend", c.backend, "serial | openmp | threads | cuda (as built)");
  app.add_option("--threads", c.threads, "host threads (0: Kokkos default)");
  app.add_option("--batch", c.batch, "rows per forward pass (does not change the outputs)");
  app.add_option("--seed", c.seed, "synthetic data: the seed training used");
  app.add_option("--synthetic-train", c.synthetic_train, "synthetic data: training samples (as train_mlp)");
  app.add_option("--synthetic-test", c.synthetic_test, "synthetic data: test samples (as train_mlp)");
  app.add_option("--save-model", c.save_model, "write the model (from a model file or a checkpoint) to this model file");
  app.add_option("--format", c.format, "--save-model format")->check(CLI::IsMember({"binary", "portable", "json"}));
  app.add_flag("--quiet", c.quiet, "print only the accuracy or RMSE");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "predict: error: %s\n", e.what());
    return 2;
  }
  int rc = 1;
  reprosgd::detail::initialize(c.threads, c.quiet);
  try {
    rc = run(c);
  } catch (const reprosgd::error& e) {
    std::fprintf(stderr, "predict: error: %s\n", without_prefix(e.what()));
    rc = exit_code(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "predict: error: %s\n", without_prefix(e.what()));
    rc = 1;
  }
  Kokkos::finalize();
  return rc;
}
