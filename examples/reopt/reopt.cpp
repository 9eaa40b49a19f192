// reopt: a re-optimising JIT on LLVM 14's ORC LLJIT, profd's reference client.
//
// It compiles a module of LLVM IR at -O2 without a profile, runs its main() a number of
// times while profd samples it, asks profd for its profile over the FIFO (jit/profd_jit.h),
// recompiles the module with that profile in LLVM's pipeline, switches to the new code and
// runs on. See examples/reopt/README.md and docs/jit-runtime.md.
//
//   reopt [--mode profile|plain|static] [--warmup N] [--iterations N] [--format extbinary|text]
//         [--profd-dir DIR] [--wait-ms MS] [--flush-timeout-ms MS] [--tier1-inline]
//         [--dump-ir FILE] IR.ll [ARG...]
//
// Every line it prints itself starts with "reopt " (the program's own output is left as it
// is), one event per line, as key=value fields after the event's name.

#include "profd_jit.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/DebugInfo/DIContext.h"
#include "llvm/DebugInfo/DWARF/DWARFContext.h"
#include "llvm/ExecutionEngine/JITEventListener.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h"
#include "llvm/ExecutionEngine/SectionMemoryManager.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/IRReader/IRReader.h"
#include "llvm/Object/SymbolSize.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/ProfileData/SampleProfReader.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/PGOOptions.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace llvm;
using namespace llvm::orc;

namespace {

enum class Mode { Profile, Plain, Static };

struct Options {
	Mode mode = Mode::Profile;
	int warmup = 5;
	int iterations = 5;
	unsigned format = PROFD_JIT_FLUSH_LLVM_EXTBINARY;
	const char *profdDir = nullptr;
	int waitMs = 3000;
	int flushTimeoutMs = 10000;
	bool tier1Inline = false;
	std::string dumpIR;
	std::string irPath;
	std::vector<std::string> args; // the program's argv, argv[0] first
};

int usage()
{
	fprintf(stderr, "usage: reopt [--mode profile|plain|static] [--warmup N] [--iterations N]\n"
	                "             [--format extbinary|text] [--profd-dir DIR] [--wait-ms MS]\n"
	                "             [--flush-timeout-ms MS] [--tier1-inline] [--dump-ir FILE] IR.ll [ARG...]\n");
	return 2;
}

// parseOptions reads flags up to the IR file; everything after it is the program's.
bool parseOptions(int argc, char **argv, Options &o)
{
	int i = 1;
	for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
		std::string flag = argv[i];
		if (flag == "--tier1-inline") {
			o.tier1Inline = true;
			continue;
		}
		if (i + 1 >= argc)
			return false;
		const char *v = argv[++i];
		if (flag == "--mode") {
			if (strcmp(v, "profile") == 0)
				o.mode = Mode::Profile;
			else if (strcmp(v, "plain") == 0)
				o.mode = Mode::Plain;
			else if (strcmp(v, "static") == 0)
				o.mode = Mode::Static;
			else
				return false;
		} else if (flag == "--warmup") {
			o.warmup = atoi(v);
		} else if (flag == "--iterations") {
			o.iterations = atoi(v);
		} else if (flag == "--format") {
			if (strcmp(v, "extbinary") == 0)
				o.format = PROFD_JIT_FLUSH_LLVM_EXTBINARY;
			else if (strcmp(v, "text") == 0)
				o.format = PROFD_JIT_FLUSH_LLVM_TEXT;
			else
				return false;
		} else if (flag == "--profd-dir") {
			o.profdDir = v;
		} else if (flag == "--wait-ms") {
			o.waitMs = atoi(v);
		} else if (flag == "--flush-timeout-ms") {
			o.flushTimeoutMs = atoi(v);
		} else if (flag == "--dump-ir") {
			o.dumpIR = v;
		} else {
			return false;
		}
	}
	if (i >= argc || o.warmup < 1 || o.iterations < 1)
		return false;
	o.irPath = argv[i];
	for (; i < argc; i++)
		o.args.push_back(argv[i]);
	return true;
}

double nowMs(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

double median(std::vector<double> v)
{
	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	size_t n = v.size();
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// CodeAnnouncer tells profd about every function of every object the JIT links: name,
// address, size, code bytes and the line table of the object's DWARF (with discriminators,
// which LLVM's sample loader matches counts by).
class CodeAnnouncer : public JITEventListener {
public:
	struct Code {
		std::string name;
		uint64_t addr;
		uint64_t index;
	};

	explicit CodeAnnouncer(profd_jit *pj) : pj_(pj) {}

	void notifyObjectLoaded(ObjectKey, const object::ObjectFile &obj,
	                        const RuntimeDyld::LoadedObjectInfo &info) override
	{
		// The debug copy has its sections' load addresses patched in, so its symbols'
		// addresses and its DWARF's line addresses are where the code runs.
		object::OwningBinary<object::ObjectFile> debugObj = info.getObjectForDebug(obj);
		if (debugObj.getBinary() == nullptr) {
			fprintf(stderr, "reopt: no debug object for a linked object; its code is not announced\n");
			return;
		}
		const object::ObjectFile &o = *debugObj.getBinary();
		std::unique_ptr<DWARFContext> dwarf = DWARFContext::create(o);
		for (const auto &symSize : object::computeSymbolSizes(o)) {
			const object::SymbolRef &sym = symSize.first;
			uint64_t size = symSize.second;
			Expected<object::SymbolRef::Type> type = sym.getType();
			if (!type || *type != object::SymbolRef::ST_Function || size == 0) {
				if (!type)
					consumeError(type.takeError());
				continue;
			}
			Expected<StringRef> name = sym.getName();
			Expected<uint64_t> addr = sym.getAddress();
			Expected<object::section_iterator> sec = sym.getSection();
			if (!name || !addr || !sec) {
				consumeError(name.takeError());
				consumeError(addr.takeError());
				consumeError(sec.takeError());
				continue;
			}
			std::vector<std::string> files;
			std::vector<profd_jit_line> lines = lineTable(*dwarf, *addr, size, (*sec)->getIndex(), files);
			Code c{name->str(), *addr, 0};
			int rc = profd_jit_code_load(pj_, c.name.c_str(), c.addr, size,
			                             reinterpret_cast<const void *>(static_cast<uintptr_t>(c.addr)),
			                             lines.data(), lines.size(), &c.index);
			size_t discriminated = std::count_if(lines.begin(), lines.end(),
			                                     [](const profd_jit_line &l) { return l.discriminator != 0; });
			printf("reopt load name=%s addr=0x%" PRIx64 " size=%" PRIu64 " lines=%zu discriminated=%zu rc=%d\n",
			       c.name.c_str(), c.addr, size, lines.size(), discriminated, rc);
			code_.push_back(c);
		}
	}

	// lineTable collects the DWARF line rows of [addr, addr+size), discriminators included
	// (DWARFContext's address-range lookup leaves them out). files holds the names the
	// entries point to.
	static std::vector<profd_jit_line> lineTable(DWARFContext &dwarf, uint64_t addr, uint64_t size,
	                                             uint64_t section, std::vector<std::string> &files)
	{
		struct Row {
			uint64_t addr;
			uint32_t line, discriminator;
			size_t file;
		};
		std::vector<Row> rows;
		for (const auto &cu : dwarf.compile_units()) {
			const DWARFDebugLine::LineTable *lt = dwarf.getLineTableForUnit(cu.get());
			if (lt == nullptr)
				continue;
			for (const DWARFDebugLine::Row &r : lt->Rows) {
				if (r.EndSequence || r.Address.Address < addr || r.Address.Address >= addr + size)
					continue;
				if (r.Address.SectionIndex != object::SectionedAddress::UndefSection &&
				    r.Address.SectionIndex != section)
					continue;
				std::string file;
				lt->getFileNameByIndex(r.File, cu->getCompilationDir(),
				                       DILineInfoSpecifier::FileLineInfoKind::AbsoluteFilePath, file);
				size_t fi = std::find(files.begin(), files.end(), file) - files.begin();
				if (fi == files.size())
					files.push_back(file);
				rows.push_back({r.Address.Address, r.Line, r.Discriminator, fi});
			}
		}
		std::stable_sort(rows.begin(), rows.end(), [](const Row &a, const Row &b) { return a.addr < b.addr; });
		std::vector<profd_jit_line> lines;
		for (const Row &r : rows) {
			profd_jit_line l;
			l.addr = r.addr;
			l.line = r.line;
			l.discriminator = r.discriminator;
			l.file = files[r.file].c_str();
			lines.push_back(l);
		}
		return lines;
	}

	size_t announced() const { return code_.size(); }

	// unloadFirst tells profd that the first n functions announced no longer run.
	void unloadFirst(size_t n)
	{
		for (size_t i = 0; i < n && i < code_.size(); i++)
			profd_jit_code_unload(pj_, code_[i].addr, code_[i].index);
		code_.erase(code_.begin(), code_.begin() + (long)std::min(n, code_.size()));
	}

private:
	profd_jit *pj_;
	std::vector<Code> code_;
};

// addResetFunction adds __reopt_reset(), which puts every writable global of M back to its
// initial value, so that main() can run again as if the program had just started.
void addResetFunction(Module &m)
{
	LLVMContext &ctx = m.getContext();
	const DataLayout &dl = m.getDataLayout();
	std::vector<GlobalVariable *> globals;
	for (GlobalVariable &g : m.globals())
		if (!g.isDeclaration() && !g.isConstant() && g.hasInitializer() && !g.getName().startswith("llvm."))
			globals.push_back(&g);
	Function *reset = Function::Create(FunctionType::get(Type::getVoidTy(ctx), false),
	                                   GlobalValue::ExternalLinkage, "__reopt_reset", m);
	IRBuilder<> b(BasicBlock::Create(ctx, "entry", reset));
	for (GlobalVariable *g : globals) {
		Constant *init = g->getInitializer();
		auto *copy = new GlobalVariable(m, init->getType(), true, GlobalValue::PrivateLinkage, init,
		                                g->getName() + ".reopt_init");
		Align align = dl.getPreferredAlign(g);
		copy->setAlignment(align);
		b.CreateMemCpy(g, g->getAlign().getValueOr(align), copy, align,
		               dl.getTypeAllocSize(init->getType()).getFixedSize());
	}
	b.CreateRetVoid();
}

// optimise runs LLVM's -O2 module pipeline on M, with the sample profile at profilePath
// when it is not empty.
void optimise(Module &m, TargetMachine &tm, const std::string &profilePath)
{
	// What clang -O2 turns on (LLVM's defaults leave SLP vectorisation off).
	PipelineTuningOptions pto;
	pto.LoopInterleaving = true;
	pto.LoopVectorization = true;
	pto.SLPVectorization = true;
	pto.LoopUnrolling = true;
	// Discriminators are added at the start of either pipeline, on the same unoptimised IR,
	// so the profiled code and the recompiled code number their blocks alike.
	PGOOptions pgo = profilePath.empty()
	                     ? PGOOptions("", "", "", PGOOptions::NoAction, PGOOptions::NoCSAction, true)
	                     : PGOOptions(profilePath, "", "", PGOOptions::SampleUse);
	LoopAnalysisManager lam;
	FunctionAnalysisManager fam;
	CGSCCAnalysisManager cgam;
	ModuleAnalysisManager mam;
	PassBuilder pb(&tm, pto, pgo);
	fam.registerPass([&] { return TargetLibraryAnalysis(TargetLibraryInfoImpl(Triple(m.getTargetTriple()))); });
	pb.registerModuleAnalyses(mam);
	pb.registerCGSCCAnalyses(cgam);
	pb.registerFunctionAnalyses(fam);
	pb.registerLoopAnalyses(lam);
	pb.crossRegisterProxies(lam, fam, cgam, mam);
	ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(OptimizationLevel::O2);
	mpm.run(m, mam);
}

struct Entry {
	int (*main)(int, char **);
	void (*reset)();
};

// Compiler turns the IR file into running code, one JITDylib per version.
class Compiler {
public:
	Compiler(LLJIT &jit, TargetMachine &tm, const Options &opt) : jit_(jit), tm_(tm), opt_(opt) {}

	// compile loads the IR anew, prepares it for this tier, optimises it (unless the IR is run
	// as given) and links it; entry points to its main() and reset function.
	bool compile(int version, bool optimiseIR, bool inlining, const std::string &profilePath, Entry &entry)
	{
		auto ctx = std::make_unique<LLVMContext>();
		SMDiagnostic diag;
		std::unique_ptr<Module> m = parseIRFile(opt_.irPath, diag, *ctx);
		if (!m) {
			diag.print("reopt", errs());
			return false;
		}
		m->setDataLayout(jit_.getDataLayout());
		for (Function &f : *m) {
			if (f.isDeclaration())
				continue;
			if (!inlining && !f.hasFnAttribute(Attribute::AlwaysInline))
				f.addFnAttr(Attribute::NoInline);
			if (!profilePath.empty())
				f.addFnAttr("use-sample-profile"); // LLVM's sample loader skips functions without it
		}
		addResetFunction(*m);
		double start = nowMs(CLOCK_MONOTONIC);
		if (optimiseIR)
			optimise(*m, tm_, profilePath);
		if (verifyModule(*m, &errs())) {
			fprintf(stderr, "reopt: the module does not verify\n");
			return false;
		}
		double optMs = nowMs(CLOCK_MONOTONIC) - start;
		unsigned withCount = 0;
		for (Function &f : *m) {
			if (f.isDeclaration())
				continue;
			if (Optional<Function::ProfileCount> c = f.getEntryCount()) {
				withCount++;
				printf("reopt entry_count version=%d function=%s count=%" PRIu64 "\n", version,
				       f.getName().str().c_str(), c->getCount());
			}
		}
		if (!opt_.dumpIR.empty() && version > 1) {
			std::error_code ec;
			raw_fd_ostream out(opt_.dumpIR, ec, sys::fs::OF_Text);
			if (!ec)
				m->print(out, nullptr);
		}

		Expected<JITDylib &> jd = jit_.createJITDylib("reopt.v" + std::to_string(version));
		if (!jd) {
			logAllUnhandledErrors(jd.takeError(), errs(), "reopt: ");
			return false;
		}
		jd->addToLinkOrder(jit_.getMainJITDylib());
		if (Error err = jit_.addIRModule(*jd, ThreadSafeModule(std::move(m), std::move(ctx)))) {
			logAllUnhandledErrors(std::move(err), errs(), "reopt: ");
			return false;
		}
		Expected<JITEvaluatedSymbol> mainSym = jit_.lookup(*jd, "main");
		if (!mainSym) {
			logAllUnhandledErrors(mainSym.takeError(), errs(), "reopt: ");
			return false;
		}
		Expected<JITEvaluatedSymbol> resetSym = jit_.lookup(*jd, "__reopt_reset");
		if (!resetSym) {
			logAllUnhandledErrors(resetSym.takeError(), errs(), "reopt: ");
			return false;
		}
		entry.main = jitTargetAddressToFunction<int (*)(int, char **)>(mainSym->getAddress());
		entry.reset = jitTargetAddressToFunction<void (*)()>(resetSym->getAddress());
		printf("reopt compiled version=%d optimised=%d inlining=%d profile=%s opt_ms=%.1f total_ms=%.1f "
		       "entry_counts=%u\n",
		       version, optimiseIR ? 1 : 0, inlining ? 1 : 0, profilePath.empty() ? "-" : profilePath.c_str(),
		       optMs, nowMs(CLOCK_MONOTONIC) - start, withCount);
		return true;
	}

private:
	LLJIT &jit_;
	TargetMachine &tm_;
	const Options &opt_;
};

// readProfile reads the profile with LLVM's own reader and prints what it holds.
bool readProfile(const std::string &path)
{
	LLVMContext ctx;
	ErrorOr<std::unique_ptr<sampleprof::SampleProfileReader>> reader =
	    sampleprof::SampleProfileReader::create(path, ctx);
	if (!reader) {
		fprintf(stderr, "reopt: profile %s: %s\n", path.c_str(), reader.getError().message().c_str());
		return false;
	}
	if (std::error_code ec = (*reader)->read()) {
		fprintf(stderr, "reopt: profile %s: %s\n", path.c_str(), ec.message().c_str());
		return false;
	}
	uint64_t total = 0;
	std::string hottest;
	uint64_t hottestTotal = 0, hottestHead = 0;
	size_t functions = 0;
	for (const auto &fp : (*reader)->getProfiles()) {
		const sampleprof::FunctionSamples &fs = fp.second;
		functions++;
		total += fs.getTotalSamples();
		if (fs.getTotalSamples() > hottestTotal) {
			hottestTotal = fs.getTotalSamples();
			hottestHead = fs.getHeadSamples();
			hottest = fs.getName().str();
		}
	}
	printf("reopt profile path=%s functions=%zu total_samples=%" PRIu64 " hottest=%s hottest_total=%" PRIu64
	       " hottest_head=%" PRIu64 "\n",
	       path.c_str(), functions, total, hottest.empty() ? "-" : hottest.c_str(), hottestTotal, hottestHead);
	return functions > 0 && total > 0;
}

// runPhase runs main() n times from a fresh state, printing each iteration's times.
void runPhase(const char *phase, int n, const Entry &entry, std::vector<std::string> &args, std::vector<double> &cpu)
{
	std::vector<char *> argv;
	for (std::string &a : args)
		argv.push_back(&a[0]);
	argv.push_back(nullptr);
	for (int i = 0; i < n; i++) {
		entry.reset();
		double wall = nowMs(CLOCK_MONOTONIC), c = nowMs(CLOCK_THREAD_CPUTIME_ID);
		int rc = entry.main((int)args.size(), argv.data());
		c = nowMs(CLOCK_THREAD_CPUTIME_ID) - c;
		wall = nowMs(CLOCK_MONOTONIC) - wall;
		fflush(stdout);
		printf("reopt iteration phase=%s index=%d cpu_ms=%.2f wall_ms=%.2f rc=%d\n", phase, i, c, wall, rc);
		cpu.push_back(c);
	}
}

int run(const Options &opt)
{
	profd_jit pj;
	int rc = profd_jit_open(&pj, opt.profdDir);
	double giveUp = nowMs(CLOCK_MONOTONIC) + opt.waitMs;
	while (rc == PROFD_JIT_NO_DAEMON && nowMs(CLOCK_MONOTONIC) < giveUp) {
		struct timespec tenMs = {0, 10000000};
		nanosleep(&tenMs, nullptr); // profd makes this process's FIFO once it has seen it
		rc = profd_jit_open(&pj, opt.profdDir);
	}
	printf("reopt profd %s\n", rc == PROFD_JIT_OK ? "connected" : rc == PROFD_JIT_NO_DAEMON ? "absent" : "error");
	if (opt.mode == Mode::Profile && rc != PROFD_JIT_OK) {
		fprintf(stderr, "reopt: --mode profile needs profd (profd --jit-image reopt, or --pid)\n");
		return 1;
	}

	CodeAnnouncer announcer(&pj);
	// The generic x86-64 CPU, as clang-14 targets by default: the IR's own target attributes
	// then agree with the code generator, and IR optimised offline runs on equal terms.
	JITTargetMachineBuilder jtmb((Triple(sys::getProcessTriple())));
	jtmb.setCPU("x86-64");
	jtmb.setCodeGenOptLevel(CodeGenOpt::Default);
	Expected<std::unique_ptr<TargetMachine>> tm = jtmb.createTargetMachine();
	if (!tm) {
		logAllUnhandledErrors(tm.takeError(), errs(), "reopt: ");
		return 1;
	}
	Expected<std::unique_ptr<LLJIT>> jit =
	    LLJITBuilder()
	        .setJITTargetMachineBuilder(jtmb)
	        .setObjectLinkingLayerCreator([&](ExecutionSession &es, const Triple &) {
		        auto layer = std::make_unique<RTDyldObjectLinkingLayer>(
		            es, [] { return std::make_unique<SectionMemoryManager>(); });
		        layer->registerJITEventListener(announcer);
		        return layer;
	        })
	        .create();
	if (!jit) {
		logAllUnhandledErrors(jit.takeError(), errs(), "reopt: ");
		return 1;
	}
	Expected<std::unique_ptr<DynamicLibrarySearchGenerator>> process =
	    DynamicLibrarySearchGenerator::GetForCurrentProcess((*jit)->getDataLayout().getGlobalPrefix());
	if (!process) {
		logAllUnhandledErrors(process.takeError(), errs(), "reopt: ");
		return 1;
	}
	(*jit)->getMainJITDylib().addGenerator(std::move(*process));

	Compiler compiler(**jit, **tm, opt);
	Entry entry{};
	bool optimiseIR = opt.mode != Mode::Static;
	if (!compiler.compile(1, optimiseIR, opt.tier1Inline || !optimiseIR, "", entry))
		return 1;
	std::vector<std::string> args = opt.args;
	std::vector<double> before, after;
	runPhase("before", opt.warmup, entry, args, before);

	if (opt.mode != Mode::Static) {
		std::string profile;
		if (opt.mode == Mode::Profile) {
			profd_jit_reply reply;
			double start = nowMs(CLOCK_MONOTONIC);
			rc = profd_jit_flush_wait(&pj, opt.format, opt.flushTimeoutMs, &reply);
			double waited = nowMs(CLOCK_MONOTONIC) - start;
			if (rc != PROFD_JIT_OK || reply.status != 0 || reply.npaths == 0) {
				fprintf(stderr, "reopt: profd's flush reply: rc=%d status=%d paths=%u\n", rc,
				        rc == PROFD_JIT_OK ? reply.status : 0, rc == PROFD_JIT_OK ? reply.npaths : 0);
				return 1;
			}
			profile = reply.paths[0];
			printf("reopt flush rc=%d status=%d paths=%u path=%s ms=%.1f\n", rc, reply.status, reply.npaths,
			       profile.c_str(), waited);
			if (!readProfile(profile)) {
				fprintf(stderr, "reopt: the profile profd wrote is empty or unreadable\n");
				return 1;
			}
		}
		Entry next{};
		size_t old = announcer.announced();
		if (!compiler.compile(2, true, true, profile, next))
			return 1;
		// From here on every iteration enters the new code: main() and everything it calls
		// are the new module's. The old code stays mapped but no longer runs.
		announcer.unloadFirst(old);
		entry = next;
	}
	runPhase("after", opt.iterations, entry, args, after);
	printf("reopt summary mode=%s before_cpu_ms=%.2f after_cpu_ms=%.2f\n",
	       opt.mode == Mode::Profile ? "profile" : opt.mode == Mode::Plain ? "plain" : "static", median(before),
	       median(after));
	profd_jit_close(&pj);
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	Options opt;
	if (!parseOptions(argc, argv, opt))
		return usage();
	setvbuf(stdout, nullptr, _IOLBF, 0);
	InitializeNativeTarget();
	InitializeNativeTargetAsmPrinter();
	InitializeNativeTargetAsmParser();
	return run(opt);
}
