// Portability shim for the benchmark binary that travels to the lent GPU machine: the static libstdc++
// of g++ 12 on Debian 12 calls arc4random (glibc 2.36) for std::random_device; a machine with an older
// glibc would refuse to start the program. Defining it here keeps the binary at glibc 2.35.
#include <sys/random.h>

#include <cstdint>

extern "C" std::uint32_t arc4random(void) {
    std::uint32_t v = 0;
    while (getrandom(&v, sizeof v, 0) != static_cast<long>(sizeof v)) {
    }
    return v;
}
