/* data: the trainer's data side — byte-level BPE tokenizer (load, encode, decode, train),
 * token shards and the deterministic sharded data loader, TensorBoard event files,
 * safetensors read/write, and the `tokenizer` / `prepare` CLI entry points. */
#ifndef MTC_TRAIN_DATA_H
#define MTC_TRAIN_DATA_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "schema/schema.h"

/* ---- tokenizer (tokenizer.c, bpe_train.c) ---- */

struct tok; /* byte-level BPE tokenizer */
/* Load a Hugging Face tokenizer.json (model.type BPE, byte-level), or a GPT-2
 * encoder.json with vocab.bpe beside it (or path "encoder.json:vocab.bpe").
 * Returns a new tokenizer (free with tok_destroy) or NULL with err set. */
struct tok *tok_load(const char *path, mtc_error_t *err);
void tok_destroy(struct tok *t);
/* Number of ids (max id + 1, including added/special tokens). */
int tok_vocab_size(const struct tok *t);
/* Id of a special/added token such as "<|endoftext|>", -1 if absent. */
int tok_special(const struct tok *t, const char *name);
/* End-of-text / end-of-sequence id ("<|endoftext|>", else "<|end_of_text|>", else "</s>"), or -1. */
int tok_eot(const struct tok *t);
/* That token's text (static), or NULL. */
const char *tok_eot_text(const struct tok *t);
/* Encode len bytes of text; special tokens written literally in the text become their ids.
 * *ids is malloc'd (caller frees), *n its length. 0, or -1 with err. */
int tok_encode(const struct tok *t, const char *text, size_t len, int32_t **ids, size_t *n,
               mtc_error_t *err);
/* Decode ids to a NUL-terminated malloc'd string (caller frees); out-of-range ids are
 * skipped. NULL only on allocation failure. */
char *tok_decode(const struct tok *t, const int32_t *ids, size_t n);
/* Train a byte-level BPE tokenizer (GPT-2 pre-tokenization) on corpus with vocab_size ids
 * (256 bytes + merges + "<|endoftext|>" as the last id) and write a HF tokenizer.json.
 * Deterministic. When the corpus runs out of pairs the vocabulary comes out smaller (EOT still
 * last): read tok_vocab_size of the result. 0, or -1 with err. */
int tok_train(const char *corpus, size_t len, int vocab_size, const char *out_json,
              mtc_error_t *err);
/* Train a SentencePiece-style BPE tokenizer (Gemma's tokenizer.json layout: <pad> <eos> <bos>
 * <unk> <start_of_turn> <end_of_turn> = 0..5, <0x00>..<0xFF> byte fallback = 6..261, then the
 * corpus's most frequent characters, then merges; spaces normalized to "▁", words start at a
 * "▁", byte tokens never merged) with at most vocab_size ids. Deterministic. 0, or -1 + err. */
int tok_train_spm(const char *corpus, size_t len, int vocab_size, const char *out_json,
                  mtc_error_t *err);

/* ---- token shards (shard.c) ----
 * Our format: 1024-byte header of 256 little-endian uint32: [0]=SHARD_MAGIC, [1]=SHARD_VERSION,
 * [2]=token width in bytes (2|4), [3]=0, [4..5]=token count (uint64 LE); then the tokens
 * (uint16 or uint32 LE). Also read: llm.c shards [0]=20240520 [1]=1 [2]=count, uint16 tokens,
 * and [0]=20240801 [1]=7 [2]=count, uint32 tokens. */
#define SHARD_MAGIC 0x3153544du /* "MTS1" */
#define SHARD_VERSION 1u
#define SHARD_HEADER_BYTES 1024
/* Write n ids with width 2 (all ids must be < 65536) or 4, atomically (temp + rename). */
int shard_write(const char *path, const int32_t *ids, size_t n, int width, mtc_error_t *err);
/* Read a whole shard (any supported format). Returns malloc'd ids (caller frees), *n the
 * count; NULL with err naming the file when missing, corrupt or truncated. */
int32_t *shard_read(const char *path, size_t *n, mtc_error_t *err);
/* Validate a shard header h (at least SHARD_HEADER_BYTES readable when fsize allows) against
 * the file size: *width (2|4) and *count. 0, or -1 with err naming path. (Used by loader.c.) */
int shard_parse_header(const unsigned char *h, size_t fsize, const char *path, int *width,
                       uint64_t *count, mtc_error_t *err);

/* ---- loader (loader.c) ----
 * Position: epoch, shard index (in sorted order), offset = global batch index within the shard.
 * rng is the seed of the current shard's window permutation (informational; it is derived from
 * the loader seed, epoch and shard, so set_pos recomputes it). */
struct loader_pos {
    uint64_t epoch, shard, offset;
    uint64_t rng;
};
struct loader;
/* dir holds <split>_*.bin shards (prepare's output; llm.c's *_<split>.bin and *_<split>_*.bin
 * are accepted too), walked in name order. Each shard is cut into windows of T+1 tokens
 * (stride T); a global batch is B*nranks windows and rank r gets windows [r*B, r*B+B) of it.
 * shuffle != 0 permutes the windows of each shard per epoch from seed (same on every rank).
 * Returns NULL with err (naming the file) on a missing dir, no shards, or a bad shard. */
struct loader *loader_create(const char *dir, const char *split, int B, int T, int rank,
                             int nranks, uint64_t seed, int shuffle, mtc_error_t *err);
/* Fill x (B,T) inputs and y (B,T) targets (next tokens) for this rank and advance. 0/-1. */
int loader_next(struct loader *l, int32_t *x, int32_t *y, mtc_error_t *err);
void loader_get_pos(const struct loader *l, struct loader_pos *pos);
/* Continue exactly from pos (from loader_get_pos of a loader created with the same dir, split,
 * B, T, nranks, seed and shuffle; each rank restores its own pos). 0/-1 with err. */
int loader_set_pos(struct loader *l, const struct loader_pos *pos, mtc_error_t *err);
/* Global batches per epoch (over all shards); tokens in all shards. */
uint64_t loader_batches_per_epoch(const struct loader *l);
uint64_t loader_ntokens(const struct loader *l);
void loader_destroy(struct loader *l);

/* ---- TensorBoard event file writer (tboard.c; formats.md) ---- */
struct tb_writer;
/* Create log_dir (mkdir -p) and events.out.tfevents.<secs>.<hostname> in it, with the
 * file_version record. NULL with err on failure. */
struct tb_writer *tb_create(const char *log_dir, mtc_error_t *err);
/* Append one scalar event and flush it. 0/-1 (errno). */
int tb_scalar(struct tb_writer *w, const char *tag, int64_t step, float value);
/* The event file's path (owned by w). */
const char *tb_path(const struct tb_writer *w);
void tb_destroy(struct tb_writer *w);

/* ---- safetensors (safetensors.c; formats.md) ---- */
struct st_tensor {
    char *name;
    char dtype[8]; /* "F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL" */
    int ndim;
    int64_t shape[8];
    void *data;
    size_t nbytes;
};
struct st_file {
    struct st_tensor *t; /* sorted by data offset; data points into map */
    int n;
    json_t *metadata; /* "__metadata__" object or NULL (owned) */
    void *map;
    size_t map_len;
};
/* Write n tensors (dtype "" means F32; nbytes must match shape*dtype size): header sorted by
 * name, padded with spaces to 8 bytes, contiguous offsets, __metadata__ {"format":"pt"}.
 * Atomic (temp + rename). 0, or -1 with err. */
int st_write(const char *path, const struct st_tensor *t, int n, mtc_error_t *err);
/* mmap and validate (header size, JSON, dtypes, shapes vs sizes, offsets contiguous from 0,
 * file size). Free with st_close. NULL with err naming the file. */
struct st_file *st_open(const char *path, mtc_error_t *err);
/* Tensor by name or NULL (pointer owned by f). */
const struct st_tensor *st_find(const struct st_file *f, const char *name);
/* Bytes per element of a dtype name, 0 if unknown. */
size_t st_dtype_size(const char *dtype);
void st_close(struct st_file *f);

/* ---- preparation (prepare.c): shared by `mtc-train prepare` and the dataset cache ---- */
struct prep_ids {
    int32_t *v;
    size_t n, cap;
};
void prep_ids_release(struct prep_ids *b);
/* Tokenize len bytes of s, named name in errors and progress lines, as plain text (one
 * document) or JSONL {"text": ...} per line; PREP_AUTO: JSONL when name ends in .jsonl or s
 * starts with '{'.
 * Appends to out an end-of-text token then the documents separated by end-of-text (when the
 * tokenizer has one). Progress lines on stderr. 0, or -1 with err ("name:line: why"). */
enum { PREP_AUTO, PREP_TEXT, PREP_JSONL };
int prep_encode(const struct tok *t, const char *name, const char *s, size_t len, int as,
                struct prep_ids *out, mtc_error_t *err);
/* Write v[0..n) as dir/<split>_NNNNNN.bin shards of at most per tokens, width 2|4 bytes. */
int prep_write_shards(const char *dir, const char *split, const int32_t *v, size_t n, size_t per,
                      int width, mtc_error_t *err);
/* dir/meta.json: the tokenizer (as named), its vocabulary size and EOT, token counts. */
int prep_write_meta(const char *dir, const char *tokenizer, const struct tok *t, size_t train,
                    size_t val, mtc_error_t *err);

/* ---- datasets (dset.c, dset_src.c, dset_gen.c; docs/datasets.md) ----
 * A dataset is a source (a .txt/.jsonl/.csv file, a directory — Hugging Face splits
 * train/validation/test.jsonl, or text files — or builtin:<generator>), a kind and a
 * tokenizer; prepared into <cache>/datasets/<key>/ where the key hashes the source's
 * content, the tokenizer's, the kind and the format version. */
enum dset_kind { DSET_PRETRAIN, DSET_SFT, DSET_DPO, DSET_RL };
extern const struct schema_enum dset_kind_enum; /* "pretrain", "sft", "dpo", "rl" */
#define DSET_FORMAT 1 /* the prepared layout's version: part of every key */

/* The built-in generators: "tiny-corpus" (text), "tiny-sft", "tiny-dpo", "tiny-rl",
 * "tiny-countdown" (JSONL).
 * Deterministic, no network. dset_generate returns the content (malloc'd, caller frees,
 * *len its size) or NULL with err (unknown name, unreadable corpus). */
char *dset_generate(const char *name, size_t *len, mtc_error_t *err);
/* The built-in tokenizer "builtin:tiny-corpus" of vocab_size ids (BPE trained on the
 * tiny corpus, deterministic) written as a tokenizer.json at out. 0, or -1 with err. */
int dset_builtin_tokenizer_write(int vocab_size, const char *out, mtc_error_t *err);
/* The kind a generator's records are (-1 when name is not a generator). */
int dset_generator_kind(const char *name);

struct dset_options {
    const char *source;    /* SRC as above */
    enum dset_kind kind;
    const char *cache_dir; /* prepare only */
    const char *tokenizer; /* a tokenizer path or "builtin:tiny-corpus" (default) */
    int vocab_size;        /* the built-in tokenizer's size (default 1024) */
    const char *name;      /* optional: <cache>/datasets/by-name/NAME -> key */
    double val_fraction;   /* pretrain val split, and sft/dpo/rl when the source has none */
    int quiet;             /* no progress lines */
    /* mtcd's (docs/design-notes.md, datasets): the source and the tokenizer already open,
     * as descriptors above 2 (else each is opened by its path, a directory's files
     * following links as any program of the user's would), and whom a source directory's
     * files are opened as then (NULL: this process; no link followed, regular files only) */
    int source_fd, tokenizer_fd;
    const struct mtc_user *read_as;
};
struct dset_result {
    char key[64], path[4096], tokenizer_path[4200];
    char source_fp[72], tokenizer_fp[72]; /* "sha256:<hex>" */
    size_t records, bytes;
    uint64_t train_tokens, val_tokens;
    int cached; /* 1: found prepared, nothing tokenized */
};
/* Validate o->source as o->kind without writing anything: r->records, r->bytes,
 * r->source_fp. 0, or -1 with err naming the problem (a JSONL/CSV one as "file:line: why"). */
int dset_check(const struct dset_options *o, struct dset_result *r, mtc_error_t *err);
/* Prepare (or find already prepared) o->source into o->cache_dir. Written under a temporary
 * name and renamed; stale temporaries of dead preparers are swept first. 0, or -1 with err;
 * nothing under an existing key is touched on failure. */
int dset_prepare(const struct dset_options *o, struct dset_result *r, mtc_error_t *err);
/* The result as the JSON object `data prepare --json` prints (new reference). */
json_t *dset_result_json(const struct dset_options *o, const struct dset_result *r);
/* The content fingerprint of a tokenizer file ("sha256:<hex>" of its bytes) into out[72].
 * 0, or -1 with err. (A checkpoint and a dataset agree when these do.) */
int dset_tokenizer_fingerprint(const char *path, char out[72], mtc_error_t *err);

/* ---- CLI entry points called from mtc-train's subcommand table ---- */
/* Their usages, without "usage: ", one or more lines each ending in '\n': the
 * subcommands print them on a bad command line, mtc-train on SUB --help. */
extern const char train_tokenizer_usage[], train_prepare_usage[], train_data_usage[];
/* mtc-train tokenizer train --vocab-size N --input F --output tok.json
 * mtc-train tokenizer encode --tokenizer T [--input F] (ids to stdout, one line)
 * mtc-train tokenizer decode --tokenizer T [--input F] (ids from stdin/F, text to stdout)
 * argv[0] is "tokenizer". Returns the process exit status. */
int train_tokenizer_main(int argc, char **argv);
/* mtc-train prepare --tokenizer T --input F(.txt|.jsonl) --output DIR [--val-fraction X]
 * [--shard-tokens N]; argv[0] is "prepare". Returns the process exit status. */
int train_prepare_main(int argc, char **argv);
/* mtc-train data generate|prepare|check ... (docs/datasets.md); argv[0] is "data". */
int train_data_main(int argc, char **argv);

#endif
