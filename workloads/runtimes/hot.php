<?php
// A CPU-bound PHP workload for profd's tests: two functions of different cost, called in a
// loop for the seconds of CPU time given (default 3; getrusage's, so a busy machine takes
// longer and is sampled as often as an idle one). Run with opcache's JIT on, and
// opcache.jit_debug=0x10 to have it name its code in /tmp/perf-PID.map. Each function runs
// 25 times in a row, so that the program's phases do not keep step with a sampler firing
// every millisecond. Under PHP-FPM, a request runs it for the seconds its "secs" query
// parameter gives (default 0.2).

function mixInts($n) {
    $h = 0x12345678;
    for ($i = 0; $i < $n; $i++) {
        $h = (($h ^ $i) * 31 + 7) & 0xffffffff; // within int: no float
        $h ^= $h >> 15;
    }
    return $h;
}

function sumSquares($n) {
    $s = 0;
    for ($i = 0; $i < $n; $i++) {
        $s += ($i % 7) * ($i % 11);
    }
    return $s;
}

function cpuSeconds() {
    $u = getrusage();
    return $u["ru_utime.tv_sec"] + $u["ru_utime.tv_usec"] / 1e6;
}

function run($seconds) {
    $end = cpuSeconds() + $seconds;
    $acc = 0;
    while (cpuSeconds() < $end) {
        for ($k = 0; $k < 25; $k++) $acc ^= mixInts(20000);
        for ($k = 0; $k < 25; $k++) $acc ^= sumSquares(20000);
    }
    return $acc;
}

$seconds = PHP_SAPI === "cli" ? (float)($argv[1] ?? 3) : (float)($_GET["secs"] ?? 0.2);
echo "done ", run($seconds), "\n";
