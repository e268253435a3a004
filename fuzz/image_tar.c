/* Fuzz harness: `mtc image import`'s reading of tar's listing — each line of
 * the input is one line of `tar -tvP --quoting-style=c` (image_tar_entry_parse)
 * and the member's name and link target are then cleaned as the import cleans
 * them. What is accepted must be safe to use: a type tar lists, a link target
 * only for links, cleaned names relative, without a ".." component, and
 * cleaning again changes nothing. */
#include "image/image.h"
#include "text.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_clean(char *s)
{
    if (image_member_clean(s) < 0)
        return;
    if (s[0] == '/' || strstr(s, "//") || !strcmp(s, "..") || !strncmp(s, "../", 3) ||
        strstr(s, "/../") || (strlen(s) >= 3 && !strcmp(s + strlen(s) - 3, "/..")))
        abort();
    char again[4096];
    if (strlen(s) >= sizeof(again))
        return;
    strcpy(again, s);
    if (image_member_clean(again) < 0 || strcmp(again, s) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_text(data, size);
    if (!buf)
        return 0;
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *end = line + strlen(line);
        struct image_tar_entry e;
        if (image_tar_entry_parse(line, &e) < 0)
            continue;
        if (!strchr("-dlhcbpC", e.type) || !e.name || e.name < line || e.name > end ||
            (e.link != NULL) != (e.type == 'l' || e.type == 'h') ||
            (e.link && (e.link < line || e.link > end)))
            abort();
        check_clean(e.name);
        if (e.link)
            check_clean(e.link);
    }
    free(buf);
    return 0;
}
