/* SPDX-License-Identifier: GPL-2.0-only */
// unwind.h - user stacks unwound from their copies by simple call-frame rules, fast.
//
// probectl's unwinder (probectl/debuginfo/dwarf/unwind.py) evaluates any CFI row; almost every row
// of compiled code says only: the CFA is the stack or frame pointer plus a constant, the return
// address is saved at the CFA plus a constant, the frame pointer is kept or saved at the CFA plus a
// constant. This walks a stack copy with rules of that form, asked of the caller (@rule_fn) once
// per address and kept, and gives up on a stack as soon as a step needs more (another rule, a word
// outside the copy, a CFA that does not move up): the caller unwinds that stack its own way, and
// says why it stops.
#ifndef PROBECTL_UNWIND_H
#define PROBECTL_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum uw_rule_kind {
	UW_RULE_STEP,		// a step by the rule's numbers
	UW_RULE_OUTERMOST,	// the return address is undefined: the stack ends here
	UW_RULE_OTHER,		// anything else: the caller's unwinder must take the stack
};

enum uw_reg { UW_SP, UW_BP };

enum uw_bp_rule {
	UW_BP_SAME,		// the caller's frame pointer is this frame's (lost if unknown)
	UW_BP_SAVED,		// saved at CFA + bp_off
	UW_BP_LOST,		// not recoverable
};

struct uw_rule {
	uint8_t kind;		// enum uw_rule_kind
	uint8_t cfa_reg;	// enum uw_reg
	uint8_t bp_rule;	// enum uw_bp_rule
	int64_t cfa_off;
	int64_t ra_off;		// the return address is saved at CFA + ra_off
	int64_t bp_off;
};

struct uw_cache;

// The rule of the frame at @address of process @pid (the instruction pointer of the innermost frame,
// a return address minus one above it) into *@ret; 0, UW_RULE_LATER when it is not known yet (not
// kept: asked again next time; the walk stops with UW_OTHER), or -1 to stop everything (the caller's
// failure).
#define UW_RULE_LATER	1
typedef int (*uw_rule_fn)(void *ctx, uint32_t pid, uint64_t address, struct uw_rule *ret);

/**
 * uw_cache_put - keep @rule for @address of @pid (a rule found meanwhile, e.g. by another thread
 * under the caller's lock); 0 or -1 (no memory)
 */
int uw_cache_put(struct uw_cache *c, uint32_t pid, uint64_t address, const struct uw_rule *rule);

// uw_cache_has - whether a rule for @address of @pid is kept
bool uw_cache_has(const struct uw_cache *c, uint32_t pid, uint64_t address);

struct uw_cache *uw_cache_new(void);
void uw_cache_free(struct uw_cache *c);

enum uw_result {
	UW_DONE,		// @out has the frames to the outermost one
	UW_OTHER,		// a step needs what these rules do not say: the caller's unwinder must take it
	UW_FAIL,		// @rule_fn failed, or no memory
};

struct uw_sample {
	uint32_t pid;		// whose maps the addresses are in
	const uint8_t *stack;	// the copy, from @sp up
	uint64_t stack_len;
	uint64_t ip, sp, bp;
	bool bp_known;
};

/**
 * uw_unwind - the return addresses of the stack of @s, innermost first, from its ip
 * @out: room for @max_frames addresses; *@nout gets how many
 *
 * UW_OTHER also when @max_frames are not enough (the caller says where the limit cut it).
 */
enum uw_result uw_unwind(const struct uw_sample *s, uint32_t max_frames, struct uw_cache *cache, uw_rule_fn fn,
			 void *ctx, uint64_t *out, uint32_t *nout);

#endif // PROBECTL_UNWIND_H
