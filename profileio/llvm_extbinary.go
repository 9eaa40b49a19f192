package profileio

// Facts about LLVM 14's ext-binary sample profile (SampleProf.h, SampleProfWriter.cpp,
// SampleProfReader.cpp), checked against what llvm-profdata-14 merge --extbinary writes:
//
//   - The file starts with two ULEB128 numbers: the magic, the bytes "SPROF42" in the high
//     seven bytes above the format byte 0x04, and the version, 103.
//   - Then a section header table: a little-endian uint64 entry count, then per entry four
//     little-endian uint64s: type, flags, offset (from the start of the file), size.
//   - llvm-profdata-14 lists seven sections in this order: ProfSummary (1), NameTable (2),
//     CSNameTable (6), FuncOffsetTable (4), LBRProfile (0x20), ProfileSymbolList (3),
//     FuncMetadata (5). The table order is the order a reader reads them in; on disk the
//     function offset table comes after the profiles it indexes.
//   - Every number inside a section is ULEB128; strings are NUL-terminated; functions are
//     named by index into the name table, which lists every name once, sorted.
//   - Flags: bit 0 of the low half is "compressed"; section-specific flags sit in the high
//     32 bits (for NameTable bit 0 is "MD5 names", bit 1 "fixed-length MD5").

const (
	extBinaryMagic   uint64 = uint64('S')<<56 | uint64('P')<<48 | uint64('R')<<40 | uint64('O')<<32 | uint64('F')<<24 | uint64('4')<<16 | uint64('2')<<8 | 0x04
	extBinaryVersion uint64 = 103
)

// Section types.
const (
	secProfSummary      uint64 = 1
	secNameTable        uint64 = 2
	secProfileSymbolLst uint64 = 3
	secFuncOffsetTable  uint64 = 4
	secFuncMetadata     uint64 = 5
	secCSNameTable      uint64 = 6
	secLBRProfile       uint64 = 0x20
)

// Section flags.
const (
	secFlagCompress    uint64 = 1
	secFlagNameMD5     uint64 = 1 << 32
	secFlagNameFixMD5  uint64 = 2 << 32
	secFlagSummaryFull uint64 = 2 << 32 // context-sensitive profile
)

// summaryCutoffs are LLVM's default profile-summary cutoffs, in parts per million.
var summaryCutoffs = [...]uint64{10000, 100000, 200000, 300000, 400000, 500000, 600000, 700000,
	800000, 900000, 950000, 990000, 999000, 999900, 999990, 999999}
