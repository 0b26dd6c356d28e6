/*
 * json.h — the little JSON a PLAID index folder holds (metadata.json,
 * <i>.metadata.json, doclens.<i>.json, plan.json, the merge manifests):
 * a bounded reader of a flat object's scalar members and of an integer
 * array, and a writer of both.  Untrusted input: every read stays inside
 * the buffer, nesting is bounded, numbers are range-checked; the library
 * keeps its no-dependency rule (no cJSON in liblik).
 */
#ifndef LIK_INDEX_JSON_H
#define LIK_INDEX_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef enum { LIK_JSON_ABSENT = 0, LIK_JSON_NUMBER, LIK_JSON_BOOL, LIK_JSON_NULL,
               LIK_JSON_STRING, LIK_JSON_OTHER } lik_json_type;

/* One member of a flat object: numbers keep their value as a double and,
 * when the text is an integer that fits int64, as is_int / i. */
typedef struct {
  char key[64];
  lik_json_type type;
  double num;
  int64_t i;
  int is_int;
  int boolean;
} lik_json_member;

#define LIK_JSON_MAX_MEMBERS 64

typedef struct {
  lik_json_member m[LIK_JSON_MAX_MEMBERS];
  int n;
} lik_json_object;

/* Parses a JSON object (members beyond LIK_JSON_MAX_MEMBERS, and nested
 * values, are skipped; nesting deeper than 32 fails).  0 on success, else a
 * message (naming `what`) in err. */
int lik_json_parse_object(const char *s, size_t n, const char *what, lik_json_object *o,
                          char *err, size_t errlen);

/* The member named key, or NULL. */
const lik_json_member *lik_json_get(const lik_json_object *o, const char *key);

/* Reads member `key` as an integer in [lo, hi] into *v: 1 if read, 0 if the
 * member is absent (v unchanged), -1 (message in err) if it is present but
 * not such an integer. */
int lik_json_get_int(const lik_json_object *o, const char *key, int64_t lo, int64_t hi,
                     int64_t *v, const char *what, char *err, size_t errlen);

/* Parses a JSON array of integers in [0, hi] into a malloc'ed *out (NULL for
 * an empty array) of *count entries.  0 on success; on failure *out is NULL
 * and err names `what`, the entry and the value. */
int lik_json_parse_int_array(const char *s, size_t n, int64_t hi, const char *what,
                             int64_t **out, int64_t *count, char *err, size_t errlen);

#endif /* LIK_INDEX_JSON_H */
