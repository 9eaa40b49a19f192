# A CPU-bound Python workload for profd's tests: two functions of different cost, called in a
# loop for the seconds of CPU time given (default 3; the process's, so a busy machine takes
# longer and is sampled as often as an idle one). Run with -X perf (Python 3.12 and later) to
# have each function's calls go through a trampoline named in /tmp/perf-PID.map. Each
# function runs 25 times in a row, so that the program's phases do not keep step with a
# sampler firing every millisecond.
import sys
import time


def mix_ints(n):
    h = 0x12345678
    for i in range(n):
        h = ((h ^ i) * 31 + 7) & 0xFFFFFFFF
        h ^= h >> 15
    return h


def sum_squares(n):
    s = 0
    for i in range(n):
        s += (i % 7) * (i % 11)
    return s


def run(seconds):
    end = time.process_time() + seconds
    acc = 0
    while time.process_time() < end:
        for _ in range(25):
            acc ^= mix_ints(2000)
        for _ in range(25):
            acc ^= sum_squares(2000)
    return acc


if __name__ == "__main__":
    print("done", run(float(sys.argv[1]) if len(sys.argv) > 1 else 3))
