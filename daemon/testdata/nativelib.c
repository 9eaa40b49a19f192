/* The shared library of profd's native-symbol test. */
__attribute__((noinline)) unsigned long native_lib_spin(unsigned long n) {
	volatile unsigned long s = 0;
	for (unsigned long i = 0; i < n; i++)
		s += i ^ (s << 1);
	return s;
}
