/* test_train_dataset: the dataset cache — source readers (JSONL, CSV, Hugging Face split
 * directories, text), built-in generators, keys, prepare twice = cached, a changed source =
 * a new key, dead preparers' temporaries swept, and bad input named in one line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "train/dset_internal.h"

static char dir[64], cache[128];

static void put(const char *name, const char *text)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
}

static const char *at(const char *name)
{
    static char p[4][256];
    static int i;
    i = (i + 1) % 4;
    snprintf(p[i], sizeof p[i], "%s/%s", dir, name);
    return p[i];
}

static struct dset_options opts(const char *src, enum dset_kind kind)
{
    struct dset_options o = {.source = src,
                             .kind = kind,
                             .cache_dir = cache,
                             .vocab_size = 1024,
                             .val_fraction = 0.05,
                             .quiet = 1};
    return o;
}

static int check_err(const char *src, enum dset_kind kind, char *why, size_t len)
{
    struct dset_options o = opts(src, kind);
    struct dset_result r;
    mtc_error_t err = {{0}};
    int rc = dset_check(&o, &r, &err);
    snprintf(why, len, "%s", err.text);
    return rc;
}

static void test_readers(void)
{
    struct dset_options o;
    struct dset_result r;
    mtc_error_t err = {{0}};
    put("a.jsonl", "{\"prompt\":\"p1\",\"response\":\"r1\",\"id\":7}\n\n"
                   "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                   "{\"role\":\"assistant\",\"content\":\"yo\"}]}\n");
    o = opts(at("a.jsonl"), DSET_SFT);
    CHECK(dset_check(&o, &r, &err) == 0 && r.records == 2,
          "JSONL: prompt/response and "
          "messages records (%s)",
          err.text);
    put("a.csv", "prompt,response\n\"hi, there\",yo\n\"two\nlines\",\"say \"\"x\"\"\"\r\n");
    o = opts(at("a.csv"), DSET_SFT);
    CHECK(dset_check(&o, &r, &err) == 0 && r.records == 2,
          "CSV: quoted commas, newlines and quotes (%s)", err.text);
    struct dset_source s;
    struct dset_records rec = {0};
    CHECK(dset_source_load(at("a.csv"), -1, NULL, &s, &err) == 0 &&
              dset_part_records(&s.parts[0], DSET_SFT, &rec, &err) == 0 && rec.n == 2 &&
              !strcmp(json_string_value(json_object_get(rec.v[1], "prompt")), "two\nlines") &&
              !strcmp(json_string_value(json_object_get(rec.v[1], "response")), "say \"x\""),
          "CSV fields are unquoted");
    dset_records_release(&rec);
    dset_source_release(&s);

    char hf[128];
    snprintf(hf, sizeof hf, "%s/hf", dir);
    mkdir(hf, 0755);
    put("hf/train.jsonl",
        "{\"prompt\":\"a\",\"answer\":\"1\"}\n{\"prompt\":\"b\",\"answer\":\"2\"}\n");
    put("hf/validation.jsonl", "{\"prompt\":\"c\",\"answer\":\"3\"}\n");
    put("hf/test.jsonl", "{\"prompt\":\"d\",\"answer\":\"4\"}\n");
    put("hf/README.md", "ignored\n");
    CHECK(dset_source_load(hf, -1, NULL, &s, &err) == 0 && s.n == 3 && !strcmp(s.parts[0].role, "train") &&
              !strcmp(s.parts[1].role, "validation") && !strcmp(s.parts[2].role, "test"),
          "Hugging Face directory: train/validation/test splits (%s)", err.text);
    dset_source_release(&s);
    o = opts(hf, DSET_RL);
    CHECK(dset_check(&o, &r, &err) == 0 && r.records == 4, "splits read as they are");

    char tx[128];
    snprintf(tx, sizeof tx, "%s/txt", dir);
    mkdir(tx, 0755);
    put("txt/b.txt", "second\n");
    put("txt/a.txt", "first\n");
    CHECK(dset_source_load(tx, -1, NULL, &s, &err) == 0 && s.n == 2 && !strcmp(s.parts[0].name, "a.txt"),
          "a directory of text files, in name order");
    dset_source_release(&s);

    // the fingerprint is the content's: the same bytes elsewhere, same fingerprint
    char fp1[72];
    CHECK(dset_source_load(at("a.jsonl"), -1, NULL, &s, &err) == 0, "load");
    snprintf(fp1, sizeof fp1, "%s", s.fp);
    dset_source_release(&s);
    put("copy.jsonl", "{\"prompt\":\"p1\",\"response\":\"r1\",\"id\":7}\n\n"
                      "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                      "{\"role\":\"assistant\",\"content\":\"yo\"}]}\n");
    CHECK(dset_source_load(at("copy.jsonl"), -1, NULL, &s, &err) == 0 && !strcmp(s.fp, fp1),
          "same content at another path: same fingerprint");
    dset_source_release(&s);
}

static void test_bad_input(void)
{
    char why[256];
    put("wrong.jsonl",
        "{\"prompt\":\"a\",\"response\":\"b\"}\n{\"prompt\":\"a\",\"reply\":\"b\"}\n");
    CHECK(check_err(at("wrong.jsonl"), DSET_SFT, why, sizeof why) < 0 &&
              strstr(why, "wrong.jsonl:2: field \"response\" missing"),
          "a wrong field names file:line: %s", why);
    put("dpo.jsonl", "{\"prompt\":\"a\",\"chosen\":\"b\",\"rejected\":\"c\"}\n");
    CHECK(check_err(at("dpo.jsonl"), DSET_SFT, why, sizeof why) < 0 &&
              strstr(why, "dpo.jsonl:1:") && strstr(why, "dpo data, not sft"),
          "a source of another kind says which: %s", why);
    put("trunc.jsonl", "{\"prompt\":\"a\",\"response\":\"b\"}\n{\"prompt\":\"a\",\"resp");
    CHECK(check_err(at("trunc.jsonl"), DSET_SFT, why, sizeof why) < 0 &&
              strstr(why, "trunc.jsonl:2: truncated"),
          "a truncated JSONL: %s", why);
    put("empty.jsonl", "\n  \n");
    CHECK(check_err(at("empty.jsonl"), DSET_SFT, why, sizeof why) < 0 && strstr(why, "empty"),
          "an empty file: %s", why);
    put("trunc.csv", "prompt,response\na,b\nc,\"open\n");
    CHECK(check_err(at("trunc.csv"), DSET_SFT, why, sizeof why) < 0 &&
              strstr(why, "trunc.csv:3: truncated"),
          "a truncated CSV: %s", why);
    put("cols.csv", "prompt,response\na,b,c\n");
    CHECK(check_err(at("cols.csv"), DSET_SFT, why, sizeof why) < 0 && strstr(why, "cols.csv:2:"),
          "a CSV row with too many fields: %s", why);
    put("plain.txt", "just text\n");
    CHECK(check_err(at("plain.txt"), DSET_DPO, why, sizeof why) < 0 &&
              strstr(why, "plain text is pretraining data, not dpo"),
          "text for a records kind: %s", why);
    CHECK(check_err("builtin:tiny-nothing", DSET_SFT, why, sizeof why) < 0 &&
              strstr(why, "unknown built-in dataset \"tiny-nothing\""),
          "an unknown generator: %s", why);
    CHECK(check_err("builtin:tiny-dpo", DSET_SFT, why, sizeof why) < 0 &&
              strstr(why, "builtin:tiny-dpo is dpo data, not sft"),
          "a generator of another kind: %s", why);
    CHECK(check_err(at("missing.jsonl"), DSET_SFT, why, sizeof why) < 0 &&
              strstr(why, "missing.jsonl"),
          "a missing file: %s", why);
    put("bin.txt", "a");
    char p[256];
    snprintf(p, sizeof p, "%s/bin.txt", dir);
    FILE *f = fopen(p, "ab");
    fputc(0, f);
    fclose(f);
    CHECK(check_err(p, DSET_PRETRAIN, why, sizeof why) < 0 && strstr(why, "not a text file"),
          "a binary file: %s", why);
    put("latin1.csv", "prompt,response\na,caf\xe9\n");
    CHECK(check_err(at("latin1.csv"), DSET_SFT, why, sizeof why) < 0 &&
              strstr(why, "latin1.csv:2: field 2 is not valid UTF-8"),
          "a CSV field that is not UTF-8: %s", why);
    put("latin1.txt", "caf\xe9 au lait\n");
    CHECK(check_err(at("latin1.txt"), DSET_PRETRAIN, why, sizeof why) == 0,
          "text need not be UTF-8 to be pretraining data (%s)", why);
    put("role.jsonl", "{\"messages\":[{\"role\":\"bot\",\"content\":\"x\"}]}\n");
    CHECK(check_err(at("role.jsonl"), DSET_SFT, why, sizeof why) < 0 &&
              strstr(why, "role.jsonl:1:") && strstr(why, "\"bot\""),
          "a bad message role: %s", why);
    for (const char *s = why; *s; s++)
        if (*s == '\n')
            CHECK(0, "errors are one line");
}

static void test_generators(void)
{
    mtc_error_t err = {{0}};
    const char *names[] = {"tiny-corpus", "tiny-sft", "tiny-dpo", "tiny-rl"};
    for (int i = 0; i < 4; i++) {
        size_t a, b;
        char *x = dset_generate(names[i], &a, &err), *y = dset_generate(names[i], &b, &err);
        CHECK(x && y && a == b && a > 10000 && !memcmp(x, y, a), "%s is deterministic (%zu bytes)",
              names[i], a);
        free(x);
        free(y);
    }
    struct dset_source s;
    struct dset_records r = {0};
    CHECK(dset_source_load("builtin:tiny-dpo", -1, NULL, &s, &err) == 0 &&
              dset_part_records(&s.parts[0], DSET_DPO, &r, &err) == 0 && r.n >= 1000,
          "tiny-dpo validates as dpo (%zu pairs)", r.n);
    size_t differ = 0;
    for (size_t i = 0; i < r.n; i++)
        differ += strcmp(json_string_value(json_object_get(r.v[i], "chosen")),
                         json_string_value(json_object_get(r.v[i], "rejected"))) != 0;
    CHECK(differ == r.n, "every tiny-dpo pair has chosen != rejected");
    dset_records_release(&r);
    dset_source_release(&s);
    CHECK(dset_source_load("builtin:tiny-rl", -1, NULL, &s, &err) == 0 &&
              dset_part_records(&s.parts[0], DSET_RL, &r, &err) == 0,
          "tiny-rl validates as rl");
    // the answers are verifiable: "What is A + B?" -> A+B
    size_t sums = 0, right = 0;
    for (size_t i = 0; i < r.n; i++) {
        int a, b;
        if (sscanf(json_string_value(json_object_get(r.v[i], "prompt")), "What is %d + %d?", &a,
                   &b) == 2) {
            sums++;
            right += atoi(json_string_value(json_object_get(r.v[i], "answer"))) == a + b;
        }
    }
    CHECK(sums > 100 && right == sums, "tiny-rl answers check out (%zu sums)", sums);
    // issue 48: the tiny SFT stage covers the RL task — every tiny-rl prompt is a tiny-sft
    // prompt with the answer as its response, so the SFT model can reach the rewards
    struct dset_source ss;
    struct dset_records sr = {0};
    CHECK(dset_source_load("builtin:tiny-sft", -1, NULL, &ss, &err) == 0 &&
              dset_part_records(&ss.parts[0], DSET_SFT, &sr, &err) == 0,
          "tiny-sft validates as sft");
    size_t covered = 0;
    for (size_t i = 0; i < r.n; i++) {
        const char *p = json_string_value(json_object_get(r.v[i], "prompt"));
        const char *a = json_string_value(json_object_get(r.v[i], "answer"));
        for (size_t j = 0; j < sr.n; j++)
            if (!strcmp(p, json_string_value(json_object_get(sr.v[j], "prompt"))) &&
                !strcmp(a, json_string_value(json_object_get(sr.v[j], "response")))) {
                covered++;
                break;
            }
    }
    CHECK(r.n > 0 && covered == r.n,
          "every tiny-rl prompt is in tiny-sft with its answer (%zu of %zu)", covered, r.n);
    dset_records_release(&sr);
    dset_source_release(&ss);
    dset_records_release(&r);
    dset_source_release(&s);
}

static int prep(const char *src, enum dset_kind kind, const char *tok, struct dset_result *r,
                char *why)
{
    struct dset_options o = opts(src, kind);
    o.tokenizer = tok;
    mtc_error_t err = {{0}};
    int rc = dset_prepare(&o, r, &err);
    if (why)
        snprintf(why, 256, "%s", err.text);
    return rc;
}

static void test_cache(void)
{
    struct dset_result r1, r2, r3;
    char why[256], mp[4300];
    struct stat s1, s2;
    CHECK(prep("builtin:tiny-corpus", DSET_PRETRAIN, NULL, &r1, why) == 0 && !r1.cached &&
              r1.train_tokens > 50000 && r1.val_tokens > 0,
          "tiny corpus prepared: %llu train tokens (%s)", (unsigned long long)r1.train_tokens, why);
    char shard[4300];
    snprintf(shard, sizeof shard, "%s/train_000000.bin", r1.path);
    size_t n = 0;
    mtc_error_t err = {{0}};
    int32_t *ids = shard_read(shard, &n, &err);
    CHECK(ids && n == r1.train_tokens, "its train shard holds the tokens the manifest says");
    free(ids);
    snprintf(mp, sizeof mp, "%s/manifest.json", r1.path);
    stat(mp, &s1);
    CHECK(prep("builtin:tiny-corpus", DSET_PRETRAIN, NULL, &r2, why) == 0 && r2.cached &&
              !strcmp(r1.key, r2.key) && r2.train_tokens == r1.train_tokens,
          "prepared twice: cached, same key");
    stat(mp, &s2);
    CHECK(s1.st_ino == s2.st_ino && s1.st_mtim.tv_nsec == s2.st_mtim.tv_nsec &&
              s1.st_mtime == s2.st_mtime,
          "the second prepare rewrote nothing");

    // the built-in tokenizer given by path has the same fingerprint: same key
    char tk[4300];
    snprintf(tk, sizeof tk, "%s/tokenizer.json", r1.path);
    CHECK(prep("builtin:tiny-corpus", DSET_PRETRAIN, tk, &r3, why) == 0 &&
              !strcmp(r3.tokenizer_fp, r1.tokenizer_fp) && !strcmp(r3.key, r1.key) && r3.cached,
          "the same tokenizer by path: same key (%s)", why);

    // a changed source gets a new key; the old one stays as it was
    put("c.jsonl",
        "{\"prompt\":\"a\",\"response\":\"b\"}\n{\"prompt\":\"c\",\"response\":\"d\"}\n");
    CHECK(prep(at("c.jsonl"), DSET_SFT, NULL, &r1, why) == 0 && !r1.cached && r1.records == 2,
          "a small sft file prepared (%s)", why);
    put("c.jsonl",
        "{\"prompt\":\"a\",\"response\":\"b\"}\n{\"prompt\":\"c\",\"response\":\"e\"}\n");
    CHECK(prep(at("c.jsonl"), DSET_SFT, NULL, &r2, why) == 0 && !r2.cached &&
              strcmp(r1.key, r2.key),
          "a changed source: a new key (%s vs %s)", r1.key, r2.key);
    snprintf(mp, sizeof mp, "%s/manifest.json", r1.path);
    CHECK(mtc_path_exists(mp), "the earlier preparation is still there");
    // a source gone bad: prepare fails and touches nothing prepared
    put("c.jsonl", "{\"prompt\":\"a\",\"response\":\"b\"}\n{\"prompt\":\"c\"}\n");
    CHECK(prep(at("c.jsonl"), DSET_SFT, NULL, &r3, why) < 0 && strstr(why, "c.jsonl:2:"),
          "a bad source fails: %s", why);
    snprintf(mp, sizeof mp, "%s/manifest.json", r2.path);
    CHECK(mtc_path_exists(mp), "and the prepared data is intact");
    // kind is part of the key
    put("rl.jsonl", "{\"prompt\":\"a\",\"answer\":\"b\",\"response\":\"b\"}\n");
    CHECK(prep(at("rl.jsonl"), DSET_RL, NULL, &r1, why) == 0 &&
              prep(at("rl.jsonl"), DSET_SFT, NULL, &r2, why) == 0 && strcmp(r1.key, r2.key),
          "the same file as rl and sft: two keys");

    // a temporary of a preparer that died is swept; a live one's is not
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    char host[256] = "", t1[512], t2[512];
    gethostname(host, sizeof host - 1);
    snprintf(t1, sizeof t1, "%s/datasets/.tmp-sft-0123-%s-%d", cache, host, (int)dead);
    snprintf(t2, sizeof t2, "%s/datasets/.tmp-sft-4567-%s-%d", cache, host, (int)getppid());
    mkdir(t1, 0755);
    mkdir(t2, 0755);
    put("d.jsonl", "{\"prompt\":\"x\",\"response\":\"y\"}\n");
    CHECK(prep(at("d.jsonl"), DSET_SFT, NULL, &r1, why) == 0, "prepare (%s)", why);
    CHECK(!mtc_path_exists(t1), "a dead preparer's temporary was swept");
    CHECK(mtc_path_exists(t2), "a live preparer's temporary was left alone");
    rmdir(t2);

    // two preparers of the same new key at once: both succeed, one whole key, no temporary
    put("race.jsonl",
        "{\"prompt\":\"r\",\"response\":\"s\"}\n{\"prompt\":\"t\",\"response\":\"u\"}\n");
    pid_t kids[4];
    for (int i = 0; i < 4; i++)
        if ((kids[i] = fork()) == 0) {
            struct dset_result rr;
            _exit(prep(at("race.jsonl"), DSET_SFT, NULL, &rr, NULL) == 0 ? 0 : 1);
        }
    int all_ok = 1;
    for (int i = 0; i < 4; i++) {
        int st = 1;
        waitpid(kids[i], &st, 0);
        all_ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    CHECK(all_ok, "four preparers of one new key at once all succeed");
    CHECK(prep(at("race.jsonl"), DSET_SFT, NULL, &r1, why) == 0 && r1.cached && r1.records == 2,
          "and leave it whole (%s)", why);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -a %s/datasets | grep -q '^\\.tmp-'", cache);
    CHECK(system(cmd) != 0, "with no temporary left");

    // --name: by-name/NAME -> the key
    struct dset_options o = opts("builtin:tiny-sft", DSET_SFT);
    o.name = "my-sft";
    CHECK(dset_prepare(&o, &r1, &err) == 0, "prepare with a name");
    char link[512], target[256] = "";
    snprintf(link, sizeof link, "%s/datasets/by-name/my-sft", cache);
    ssize_t tl = readlink(link, target, sizeof target - 1);
    CHECK(tl > 0 && strstr(target, r1.key), "by-name/my-sft -> %s", target);
    o.name = "../evil";
    CHECK(dset_prepare(&o, &r2, &err) < 0 && strstr(err.text, "invalid dataset name"),
          "a bad name is refused: %s", err.text);
    // the trainer reads the prepared SFT set
    char tj[4300], vj[4300];
    snprintf(tj, sizeof tj, "%s/train.jsonl", r1.path);
    snprintf(vj, sizeof vj, "%s/val.jsonl", r1.path);
    CHECK(mtc_path_exists(tj) && mtc_path_exists(vj) && r1.records == 4000 &&
              r1.train_tokens > r1.val_tokens && r1.val_tokens > 0,
          "tiny-sft: train.jsonl and val.jsonl");
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_dataset.XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    snprintf(cache, sizeof cache, "%s/cache", dir);
    test_readers();
    test_bad_input();
    test_generators();
    test_cache();
    mtc_rm_rf(dir);
    return check_done();
}
