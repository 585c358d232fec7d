// loch-synth — writes synthetic GGUF models (real architectures, generated weights) for tests and benchmarks.
#include <cstdio>

int main() {
    std::fprintf(stderr, "loch-synth: not implemented yet\n");
    return 1;
}
