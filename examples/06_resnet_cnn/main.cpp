// SPDX-License-Identifier: BSD-3-Clause
/// @file A ResNet-style convolutional network, written with the library's layers.
///
/// A stem (3x3 convolution, batch norm, ReLU), two residual stages — a basic block that keeps the
/// shape, then a strided block whose shortcut is a 1x1 convolution — global average pooling and a
/// classifier, trained with Adam on 3x12x12 synthetic images. Batch norm's statistics are those
/// of each micro-batch and its running statistics are blended once per step from the exact sum of
/// the micro-batches' (docs/layers.md), so the fingerprint it prints is the same for any thread
/// count (`resnet_cnn --kokkos-threads=1`, `=2`, ...), backend, or number of ranks the same run
/// is spread over.
#include <reprosgd/reprosgd.hpp>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);
  try {
    reprosgd::check_fp_environment();
    using namespace reprosgd;

    // 3 channels of 12 x 12 pixels: 432 features a sample, stored NHWC (docs/layers.md).
    const ImageShape image{3, 12, 12};
    auto data = make_synthetic_train_test(/*seed=*/5, 768, 256, static_cast<int>(image.size()), /*classes=*/6,
                                          {.separation = 0.12f});
    data.train.sample_shape = data.test.sample_shape = image;

    // A basic block: conv-bn-relu-conv-bn, added to its input; ReLU after the sum.
    auto basic_block = [](ImageShape s) {
      return Residual{Conv2D{s, s.channels, 3, 1, 1}, BatchNorm2D{s}, ReLU{}, Conv2D{s, s.channels, 3, 1, 1},
                      BatchNorm2D{s}};
    };
    // A downsampling block: stride 2 and twice the channels; the shortcut a strided 1x1 convolution.
    auto down_block = [](ImageShape s) {
      const ImageShape out{2 * s.channels, (s.height + 1) / 2, (s.width + 1) / 2};
      return ProjectedResidual{Conv2D{s, out.channels, 1, 2}, Conv2D{s, out.channels, 3, 2, 1}, BatchNorm2D{out}, ReLU{},
                               Conv2D{out, out.channels, 3, 1, 1}, BatchNorm2D{out}};
    };
    const ImageShape stem{16, 12, 12}, stage2{32, 6, 6};
    Sequential model{Conv2D{image, stem.channels, 3, 1, 1}, BatchNorm2D{stem}, ReLU{},  // stem
                     basic_block(stem), ReLU{},                                          // stage 1: 16x12x12
                     down_block(stem), ReLU{},                                           // stage 2: 32x6x6
                     GlobalAvgPool{stage2}, Dropout{0.1f}, Dense{stage2.channels, 6}};

    Trainer<Serial<>> trainer({.global_batch = 32, .micro_batch = 8, .epochs = 3, .seed = 5});
    const Adam adam{{.lr = 2e-3f}};
    auto state = trainer.start(model, adam);
    std::printf("model: %zu parameters in %zu layers\n", model.canonical_parameter_count(), model.depth);
    trainer.fit(model, adam, state, data.train);

    const EvalMetrics test = trainer.evaluate(model, data.test);  // batch norm with its running statistics
    std::printf("test loss %.4f, accuracy %.3f\n", test.loss, test.accuracy);
    std::printf("fingerprint %s\n", fingerprint(model, state.optimizer).hex().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resnet_cnn: error: %s\n", e.what());
    return 1;
  }
}
