// leaves: a program whose time is in functions that set no frame pointer, all called from
// run(), which main() calls: libc's strlen over a long string; mix(), a leaf that keeps its
// locals in registers; pushed(), a leaf that saves two registers on the stack, as a leaf
// that needs callee-saved registers does (its return address 16 bytes above the stack
// pointer through its loop); framed(), a leaf that saves a register and keeps ten words of
// locals (its return address 88 bytes above); and stale(), framed() with the return address
// of an earlier call left at the stack pointer. Built as distributions build C with frame
// pointers (-fno-omit-frame-pointer -momit-leaf-frame-pointer: leaves keep none), a walk by
// frame pointers from a sample in any of them goes from it to main, skipping run.
// Argument: seconds to run (default 5).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LEN (1 << 16)

static char buf[LEN + 1];

__attribute__((noinline)) unsigned long mix(unsigned long x) {
	for (int i = 0; i < 500; i++) x = (x ^ (x >> 7)) * 0x9E3779B97F4A7C15ul + (unsigned long)i;
	return x;
}

// pushed(x) mixes x as mix does, in rbx and r12, which it saves first (written in assembly
// so that the frame is what it says whatever the compiler).
unsigned long pushed(unsigned long x);
__asm__(".text\n"
	".globl pushed\n"
	".type pushed, @function\n"
	"pushed:\n"
	".cfi_startproc\n"
	"	pushq %rbx\n"
	".cfi_def_cfa_offset 16\n"
	".cfi_offset %rbx, -16\n"
	"	pushq %r12\n"
	".cfi_def_cfa_offset 24\n"
	".cfi_offset %r12, -24\n"
	"	movq %rdi, %rbx\n"
	"	movl $500, %r12d\n"
	"1:	movq %rbx, %rax\n"
	"	shrq $7, %rax\n"
	"	xorq %rax, %rbx\n"
	"	imulq $0x7F4A7C15, %rbx, %rbx\n"
	"	addq %r12, %rbx\n"
	"	decl %r12d\n"
	"	jnz 1b\n"
	"	movq %rbx, %rax\n"
	"	popq %r12\n"
	".cfi_def_cfa_offset 16\n"
	"	popq %rbx\n"
	".cfi_def_cfa_offset 8\n"
	"	ret\n"
	".cfi_endproc\n"
	".size pushed, .-pushed\n");

// FRAMED_LOOP(locals) is framed's loop and return, and stale's: x, in rdi, mixed as mix does
// in rbx, its last values kept in the eight words from locals(%rsp) on and the count at
// 72(%rsp), in a frame of 80 bytes below the saved rbx.
#define FRAMED_LOOP(locals) \
	"	movq %rdi, %rbx\n" \
	"	movl $250, %ecx\n" \
	"1:	movq %rbx, %rax\n" \
	"	shrq $7, %rax\n" \
	"	xorq %rax, %rbx\n" \
	"	imulq $0x7F4A7C15, %rbx, %rbx\n" \
	"	addq %rcx, %rbx\n" \
	"	movl %ecx, %eax\n" \
	"	andl $7, %eax\n" \
	"	movq %rbx, " locals "(%rsp,%rax,8)\n" \
	"	movq %rcx, 72(%rsp)\n" \
	"	decl %ecx\n" \
	"	jnz 1b\n" \
	"	movq %rbx, %rax\n" \
	"	addq $80, %rsp\n" \
	".cfi_def_cfa_offset 16\n" \
	"	popq %rbx\n" \
	".cfi_def_cfa_offset 8\n" \
	"	ret\n" \
	".cfi_endproc\n"

// framed(x) mixes x as mix does, in rbx, which it saves, keeping its last values in the ten
// words of its frame.
unsigned long framed(unsigned long x);
__asm__(".text\n"
	".globl framed\n"
	".type framed, @function\n"
	"framed:\n"
	".cfi_startproc\n"
	"	pushq %rbx\n"
	".cfi_def_cfa_offset 16\n"
	".cfi_offset %rbx, -16\n"
	"	subq $80, %rsp\n"
	".cfi_def_cfa_offset 96\n"
	FRAMED_LOOP("")
	".size framed, .-framed\n");

// stale(x) mixes x as framed does, in a frame as large, but calls tick first, with its frame
// a word smaller: tick's return address, which follows a call as its own does, is left as
// the word the stack pointer points at, below those the loop writes, as a return address
// an earlier call left in what is now a function's frame is.
unsigned long stale(unsigned long x);
__asm__(".text\n"
	".type tick, @function\n"
	"tick:\n"
	"	ret\n"
	".size tick, .-tick\n"
	".globl stale\n"
	".type stale, @function\n"
	"stale:\n"
	".cfi_startproc\n"
	"	pushq %rbx\n"
	".cfi_def_cfa_offset 16\n"
	".cfi_offset %rbx, -16\n"
	"	subq $72, %rsp\n"
	".cfi_def_cfa_offset 88\n"
	"	call tick\n"
	"	subq $8, %rsp\n"
	".cfi_def_cfa_offset 96\n"
	FRAMED_LOOP("8")
	".size stale, .-stale\n");

__attribute__((noinline)) unsigned long run(unsigned long i) {
	buf[i % LEN] = (char)('a' + (i & 7)); // a string strlen cannot be hoisted over
	return strlen(buf) + mix(i) + pushed(i) + framed(i) + stale(i);
}

int main(int argc, char **argv) {
	double secs = argc > 1 ? atof(argv[1]) : 5;
	memset(buf, 'a', LEN);
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	unsigned long acc = 0;
	for (unsigned long i = 0;; i++) {
		acc += run(i);
		if ((i & 255) == 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 >= secs)
				break;
		}
	}
	printf("%lu\n", acc);
	return 0;
}
