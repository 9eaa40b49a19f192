package bpf

// MaxAllUIDs is the most users Config.AllUIDs may name (profile.c's all_uids).
const MaxAllUIDs = 256
