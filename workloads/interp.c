// interp: a bytecode interpreter whose dispatch is one switch in a loop (a jump table),
// running a program that counts primes below N by trial division. Stresses an indirect jump
// with many targets and short blocks.
#include <stdio.h>
#include <stdlib.h>

enum { PUSH, LOAD, STORE, ADD, MUL, MOD, LT, JZ, JMP, HALT };

static long run(const int *code, long *vars) {
	long stack[64];
	int sp = 0, pc = 0;
	for (;;) {
		switch (code[pc++]) {
		case PUSH: stack[sp++] = code[pc++]; break;
		case LOAD: stack[sp++] = vars[code[pc++]]; break;
		case STORE: vars[code[pc++]] = stack[--sp]; break;
		case ADD: sp--; stack[sp - 1] += stack[sp]; break;
		case MUL: sp--; stack[sp - 1] *= stack[sp]; break;
		case MOD: sp--; stack[sp - 1] %= stack[sp]; break;
		case LT: sp--; stack[sp - 1] = stack[sp - 1] < stack[sp]; break;
		case JZ: sp--; pc = stack[sp] ? pc + 1 : code[pc]; break;
		case JMP: pc = code[pc]; break;
		case HALT: return vars[2];
		}
	}
}

static int prog[128], len;
static void emit(int w) { prog[len++] = w; }
static int here(void) { return len; }
static int hole(void) { emit(-1); return len - 1; }

int main(int argc, char **argv) {
	long vars[4] = {argc > 1 ? atol(argv[1]) : 3000, 0, 0, 0}; // n, i, count, d
	int fixNext, fixPrime, fixEnd;
	emit(PUSH); emit(2); emit(STORE); emit(1);                              // i = 2
	int outer = here();
	emit(LOAD); emit(1); emit(LOAD); emit(0); emit(LT); emit(JZ); fixEnd = hole(); // while i < n
	emit(PUSH); emit(2); emit(STORE); emit(3);                              // d = 2
	int inner = here();
	emit(LOAD); emit(3); emit(LOAD); emit(3); emit(MUL);                    // while d*d < i+1
	emit(LOAD); emit(1); emit(PUSH); emit(1); emit(ADD); emit(LT); emit(JZ); fixPrime = hole();
	emit(LOAD); emit(1); emit(LOAD); emit(3); emit(MOD); emit(JZ); fixNext = hole(); // i%d==0: composite
	emit(LOAD); emit(3); emit(PUSH); emit(1); emit(ADD); emit(STORE); emit(3); // d++
	emit(JMP); emit(inner);
	prog[fixPrime] = here();
	emit(LOAD); emit(2); emit(PUSH); emit(1); emit(ADD); emit(STORE); emit(2); // count++
	prog[fixNext] = here();
	emit(LOAD); emit(1); emit(PUSH); emit(1); emit(ADD); emit(STORE); emit(1); // i++
	emit(JMP); emit(outer);
	prog[fixEnd] = here();
	emit(HALT);
	printf("interp %ld\n", run(prog, vars));
	return 0;
}
