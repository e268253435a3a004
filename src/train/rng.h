/* rng: the trainer's one pseudo-random generator (SplitMix64) and the seeded
 * Fisher-Yates order built on it. Everything that must come out the same on
 * every rank and after a resume (data order, generated datasets, sampling)
 * draws from here. Header-only: each user inlines it. */
#ifndef MTC_TRAIN_RNG_H
#define MTC_TRAIN_RNG_H

#include <stddef.h>
#include <stdint.h>

/* The next value of the SplitMix64 sequence whose state is *s. */
static inline uint64_t train_splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* perm[0..n) = a permutation of 0..n-1 fixed by (seed, epoch): the order of
 * one epoch of a shuffled set (SFT, DPO, GRPO prompts). */
static inline void train_epoch_perm(uint32_t *perm, size_t n, uint64_t seed, uint64_t epoch)
{
    uint64_t s = seed * 0x100000001b3ull ^ (epoch + 1) * 0x9e3779b97f4a7c15ull;
    for (size_t j = 0; j < n; j++)
        perm[j] = (uint32_t)j;
    for (size_t j = n; j > 1; j--) {
        size_t r = (size_t)(train_splitmix64(&s) % j);
        uint32_t t = perm[j - 1];
        perm[j - 1] = perm[r];
        perm[r] = t;
    }
}

#endif
