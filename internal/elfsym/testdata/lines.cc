// A C++ program for elfsym's line-table test: the standard library's templates inlined
// from its headers give rows of many files.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

int main(int argc, char **argv) {
	std::vector<std::string> words(argv, argv + argc);
	std::sort(words.begin(), words.end());
	std::map<std::string, int> counts;
	for (const auto &w : words)
		counts[w]++;
	for (const auto &[w, n] : counts)
		std::printf("%s %d\n", w.c_str(), n);
	return 0;
}
