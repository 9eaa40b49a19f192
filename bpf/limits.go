package bpf

// MaxAllUIDs is the most users Config.AllUIDs may name (profile.c's all_uids).
const MaxAllUIDs = 256

// MaxAllCgroups is the most cgroup directories SetCgroups may name (profile.c's
// all_cgroups).
const MaxAllCgroups = 1024

// MaxTextRanges is the most processes SetGoText and SetJITText may describe at once
// (profile.c's text_ranges).
const MaxTextRanges = 16384
