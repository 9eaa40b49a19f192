// A C++ function for elfsym's demangling test.
namespace pg {
template <typename T> struct Tuple {
	__attribute__((noinline)) static T form(T a, int b) { return a * b + 1; }
};
} // namespace pg

long use(long x) { return pg::Tuple<long>::form(x, 3); }
