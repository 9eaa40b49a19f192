package bpf

// MaxAllUIDs is the most users Config.AllUIDs may name (profile.c's all_uids).
const MaxAllUIDs = 256

// MaxAllCgroups is the most cgroup directories SetCgroups may name (profile.c's
// all_cgroups).
const MaxAllCgroups = 1024

// MaxGoTexts is the most processes SetGoText may describe at once (profile.c's go_text).
const MaxGoTexts = 16384
