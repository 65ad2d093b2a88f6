/* Tests for run configuration (src/core/config.c, include/nevo/config.h): defaults,
 * loading JSON files, every class of bad input with the content of its message,
 * `key=value` overrides, cross-key checks and the JSON dump, which policy files and
 * checkpoints store and re-apply, so it must round-trip. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "nevo/config.h"

/* Writes text to <tmpdir>/name and returns the path (static buffer). */
static const char *write_tmp(const char *name, const char *text) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f, "cannot create %s", path);
    fputs(text, f);
    fclose(f);
    return path;
}

#define CHECK_CONTAINS(msg, sub) \
    CHECK_MSG(strstr((msg), (sub)) != NULL, "message \"%s\" lacks \"%s\"", (msg), (sub))

/* Applies text on top of defaults; expects failure with NEVO_ERR_INVALID and returns the
 * message (static buffer). */
static const char *apply_fails(const char *text) {
    static NevoError err;
    NevoConfig cfg;
    nevo_config_defaults(&cfg);
    memset(&err, 0, sizeof err);
    NevoStatus st = nevo_config_apply_json(&cfg, text, "test.json", &err);
    CHECK_MSG(st == NEVO_ERR_INVALID, "'%s' gave status %d (%s), want invalid", text, (int)st,
              err.msg);
    CHECK(err.status == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "test.json");
    return err.msg;
}

static const char *override_fails(NevoConfig *cfg, const char *assignment) {
    static NevoError err;
    memset(&err, 0, sizeof err);
    NevoStatus st = nevo_config_override(cfg, assignment, &err);
    CHECK_MSG(st == NEVO_ERR_INVALID, "override '%s' gave status %d, want invalid", assignment,
              (int)st);
    return err.msg;
}

static void override_ok(NevoConfig *cfg, const char *assignment) {
    NevoError err = {0};
    NevoStatus st = nevo_config_override(cfg, assignment, &err);
    CHECK_MSG(st == NEVO_OK, "override '%s' failed: %s", assignment, err.msg);
}

TEST(config_defaults) {
    NevoConfig c;
    memset(&c, 0xAB, sizeof c); /* defaults must set everything, not rely on zeroed memory */
    nevo_config_defaults(&c);
    CHECK(strcmp(c.env, "CartPole-v1") == 0);
    CHECK(strcmp(c.algo, "ga") == 0);
    CHECK(c.seed == 1);
    CHECK_EQ_INT(c.population, 100);
    CHECK_EQ_INT(c.generations, 50);
    CHECK_EQ_INT(c.threads, 0);
    CHECK_EQ_INT(c.episodes, 1);
    CHECK_EQ_INT(c.max_episode_steps, 0);
    CHECK_EQ_INT(c.eval_episodes, 100);
    CHECK_EQ_INT(c.checkpoint_every, 1);
    CHECK_EQ_INT(c.noise_table_floats, 0); /* automatic */
    CHECK_EQ_INT(c.n_env_options, 0);
    CHECK_EQ_INT(c.policy.n_hidden, 2);
    CHECK_EQ_INT(c.policy.hidden[0], 64);
    CHECK_EQ_INT(c.policy.hidden[1], 64);
    CHECK_EQ_INT(c.policy.n_conv, 0);
    CHECK(strcmp(c.policy.activation, "tanh") == 0);
    CHECK(strcmp(c.policy.init, "scaled") == 0);
    /* Deep GA (Such et al. 2017) and OpenAI ES (Salimans et al. 2017) settings */
    CHECK(c.ga.sigma == 0.002);
    CHECK_EQ_INT(c.ga.truncation, 20);
    CHECK_EQ_INT(c.ga.elitism, 1);
    CHECK_EQ_INT(c.ga.validation_candidates, 10);
    CHECK_EQ_INT(c.ga.validation_episodes, 30);
    CHECK(c.es.sigma == 0.02);
    CHECK(strcmp(c.es.optimizer, "adam") == 0);
    CHECK(c.es.lr == 0.01);
    CHECK(c.es.l2 == 0.005);
    CHECK(c.es.beta1 == 0.9 && c.es.beta2 == 0.999 && c.es.momentum == 0.9);
    CHECK_EQ_INT(c.es.obs_norm, 1);
    CHECK(c.es.obs_norm_prob == 0.01);
    CHECK_EQ_INT(c.es.center_episodes, 10);
    NevoError err = {0};
    CHECK_MSG(nevo_config_check(&c, &err) == NEVO_OK, "defaults fail the check: %s", err.msg);
}

TEST(config_load_file) {
    const char *path = write_tmp("run.json",
                                 "{\n"
                                 "  \"_comment\": \"keys starting with _ are ignored\",\n"
                                 "  \"env\": \"Pendulum-v1\",\n"
                                 "  \"algo\": \"es\",\n"
                                 "  \"seed\": 123456789012,\n"
                                 "  \"population\": 64,\n"
                                 "  \"policy\": {\"hidden\": [32, 16, 8], \"activation\": \"relu\",\n"
                                 "             \"init\": \"normc\"},\n"
                                 "  \"ga.sigma\": 0.5,\n"
                                 "  \"es\": {\"sigma\": 0.1, \"optimizer\": \"sgd\", \"obs_norm\": false,\n"
                                 "         \"lr\": 3},\n"
                                 "  \"env_options\": {\"sticky_prob\": 0.25, \"flag\": true}\n"
                                 "}\n");
    NevoConfig c;
    NevoError err = {0};
    NevoStatus st = nevo_config_load(&c, path, &err);
    CHECK_MSG(st == NEVO_OK, "load: %s", err.msg);
    CHECK(strcmp(c.env, "Pendulum-v1") == 0);
    CHECK(strcmp(c.algo, "es") == 0);
    CHECK(c.seed == 123456789012ull);
    CHECK_EQ_INT(c.population, 64);
    CHECK_EQ_INT(c.policy.n_hidden, 3);
    CHECK(c.policy.hidden[0] == 32 && c.policy.hidden[1] == 16 && c.policy.hidden[2] == 8);
    CHECK(strcmp(c.policy.activation, "relu") == 0);
    CHECK(strcmp(c.policy.init, "normc") == 0);
    CHECK(c.ga.sigma == 0.5);
    CHECK(c.es.sigma == 0.1);
    CHECK(c.es.lr == 3.0); /* an integer is a valid number */
    CHECK(strcmp(c.es.optimizer, "sgd") == 0);
    CHECK_EQ_INT(c.es.obs_norm, 0);
    CHECK_EQ_INT(c.n_env_options, 2);
    int seen = 0;
    for (int i = 0; i < c.n_env_options; i++) {
        if (strcmp(c.env_options[i].key, "sticky_prob") == 0) seen += c.env_options[i].value == 0.25;
        if (strcmp(c.env_options[i].key, "flag") == 0) seen += c.env_options[i].value == 1.0;
    }
    CHECK_EQ_INT(seen, 2);
    /* keys not in the file keep their defaults */
    CHECK_EQ_INT(c.generations, 50);
    CHECK_EQ_INT(c.ga.truncation, 20);
    CHECK(c.es.beta1 == 0.9);
}

TEST(config_load_missing_file) {
    char path[1024];
    snprintf(path, sizeof path, "%s/does-not-exist.json", test_tmpdir());
    NevoConfig c;
    NevoError err = {0};
    CHECK(nevo_config_load(&c, path, &err) == NEVO_ERR_IO);
    CHECK_CONTAINS(err.msg, path);
}

TEST(config_malformed_json_reports_line_col) {
    /* line 3, the '5' is column 10: `  "seed" 5` lacks its ':' */
    const char *path = write_tmp("bad.json", "{\n  \"population\": 10,\n  \"seed\" 5\n}\n");
    NevoConfig c;
    NevoError err = {0};
    CHECK(nevo_config_load(&c, path, &err) == NEVO_ERR_INVALID);
    char want[1100];
    snprintf(want, sizeof want, "%s:3:10:", path);
    CHECK_CONTAINS(err.msg, want);
    CHECK_CONTAINS(err.msg, "malformed JSON");

    /* truncated document; not an object */
    CHECK_CONTAINS(apply_fails("{\"population\": [1, 2"), "test.json:1:");
    CHECK_CONTAINS(apply_fails("[1, 2]"), "JSON object");
    CHECK_CONTAINS(apply_fails(""), "malformed JSON");
}

TEST(config_duplicate_keys_rejected) {
    const char *m = apply_fails("{\"population\": 10, \"population\": 20}");
    CHECK_CONTAINS(m, "duplicate");
    CHECK_CONTAINS(m, "population");
    /* inside a section too */
    CHECK_CONTAINS(apply_fails("{\"ga\": {\"sigma\": 1, \"sigma\": 2}}"), "duplicate");
}

TEST(config_unknown_key_suggests_closest) {
    const char *m = apply_fails("{\"ga\": {\"sigam\": 0.1}}");
    CHECK_CONTAINS(m, "'ga.sigam'");
    CHECK_CONTAINS(m, "did you mean 'ga.sigma'");
    m = apply_fails("{\"ga.sigam\": 0.1}");
    CHECK_CONTAINS(m, "did you mean 'ga.sigma'");
    m = apply_fails("{\"populaton\": 10}");
    CHECK_CONTAINS(m, "'populaton'");
    CHECK_CONTAINS(m, "did you mean 'population'");
    m = apply_fails("{\"es\": {\"obs_nrom\": true}}");
    CHECK_CONTAINS(m, "did you mean 'es.obs_norm'");
    m = apply_fails("{\"env_opts\": {}}");
    CHECK_CONTAINS(m, "did you mean 'env_options'");
    /* nothing plausible: no suggestion, a pointer to the key list instead */
    m = apply_fails("{\"zzzzzzzzzzzzzzzz\": 1}");
    CHECK_CONTAINS(m, "unknown key 'zzzzzzzzzzzzzzzz'");
    CHECK(strstr(m, "did you mean") == NULL);
    CHECK_CONTAINS(m, "nevo train --help");
}

TEST(config_wrong_type) {
    const char *m = apply_fails("{\"population\": \"10\"}");
    CHECK_CONTAINS(m, "population must be an integer, got a string");
    m = apply_fails("{\"population\": 10.5}");
    CHECK_CONTAINS(m, "population must be an integer, got a number");
    m = apply_fails("{\"ga\": {\"elitism\": 1}}");
    CHECK_CONTAINS(m, "ga.elitism must be true or false, got an integer");
    m = apply_fails("{\"ga\": {\"sigma\": \"big\"}}");
    CHECK_CONTAINS(m, "ga.sigma must be a number, got a string");
    m = apply_fails("{\"env\": 3}");
    CHECK_CONTAINS(m, "env must be a string, got an integer");
    m = apply_fails("{\"policy\": {\"hidden\": 64}}");
    CHECK_CONTAINS(m, "policy.hidden must be a list of integers, got an integer");
    m = apply_fails("{\"policy\": {\"hidden\": [64, \"a\"]}}");
    CHECK_CONTAINS(m, "policy.hidden[1] must be an integer, got a string");
    m = apply_fails("{\"ga\": 5}");
    CHECK_CONTAINS(m, "ga must be an object, got an integer");
    m = apply_fails("{\"env_options\": [1]}");
    CHECK_CONTAINS(m, "env_options must be an object, got a list");
    m = apply_fails("{\"env_options\": {\"sticky_prob\": \"x\"}}");
    CHECK_CONTAINS(m, "env_options.sticky_prob must be a number or boolean, got a string");
    m = apply_fails("{\"seed\": -1}");
    CHECK_CONTAINS(m, "seed must be >= 0");
    m = apply_fails("{\"env\": \"\"}");
    CHECK_CONTAINS(m, "env must not be empty");
}

TEST(config_out_of_range) {
    const char *m = apply_fails("{\"population\": 0}");
    CHECK_CONTAINS(m, "population = 0 is out of range");
    CHECK_CONTAINS(m, "between 1 and");
    m = apply_fails("{\"ga\": {\"sigma\": -0.5}}");
    CHECK_CONTAINS(m, "ga.sigma = -0.5 is out of range");
    m = apply_fails("{\"es\": {\"obs_norm_prob\": 2}}");
    CHECK_CONTAINS(m, "es.obs_norm_prob = 2 is out of range: it must be between 0 and 1");
    m = apply_fails("{\"policy\": {\"hidden\": [8, 0]}}");
    CHECK_CONTAINS(m, "policy.hidden[1] = 0 is out of range");
    m = apply_fails("{\"policy\": {\"hidden\": [1,1,1,1,1,1,1,1,1]}}");
    CHECK_CONTAINS(m, "policy.hidden has 9 entries, at most 8 allowed");
    m = apply_fails("{\"threads\": -1}");
    CHECK_CONTAINS(m, "threads = -1 is out of range");
    /* the range ends are inclusive */
    NevoConfig c;
    nevo_config_defaults(&c);
    NevoError err = {0};
    CHECK(nevo_config_apply_json(&c, "{\"population\": 1, \"es\": {\"obs_norm_prob\": 1}}", "t",
                                 &err) == NEVO_OK);
    CHECK_EQ_INT(c.population, 1);
    CHECK(c.es.obs_norm_prob == 1.0);
}

TEST(config_invalid_choice) {
    const char *m = apply_fails("{\"algo\": \"sgd\"}");
    CHECK_CONTAINS(m, "algo = 'sgd' is not one of ga|es|rs");
    m = apply_fails("{\"policy\": {\"activation\": \"sigmoid\"}}");
    CHECK_CONTAINS(m, "policy.activation = 'sigmoid' is not one of tanh|relu");
    m = apply_fails("{\"es\": {\"optimizer\": \"adamw\"}}");
    CHECK_CONTAINS(m, "es.optimizer = 'adamw' is not one of adam|sgd");
    m = apply_fails("{\"env\": \"A-name-much-longer-than-the-sixty-four-byte-buffer-of-the-env-field-xx\"}");
    CHECK_CONTAINS(m, "too long");
}

TEST(config_overrides) {
    NevoConfig c;
    nevo_config_defaults(&c);
    override_ok(&c, "ga.sigma=0.01");
    CHECK(c.ga.sigma == 0.01);
    override_ok(&c, "policy.hidden=[8,8]");
    CHECK_EQ_INT(c.policy.n_hidden, 2);
    CHECK(c.policy.hidden[0] == 8 && c.policy.hidden[1] == 8);
    override_ok(&c, "policy.hidden=[]");
    CHECK_EQ_INT(c.policy.n_hidden, 0);
    override_ok(&c, "env=Acrobot-v1"); /* a bare word is a string */
    CHECK(strcmp(c.env, "Acrobot-v1") == 0);
    override_ok(&c, "env=\"MountainCar-v0\""); /* and so is a JSON string */
    CHECK(strcmp(c.env, "MountainCar-v0") == 0);
    override_ok(&c, "env_options.sticky_prob=0");
    CHECK_EQ_INT(c.n_env_options, 1);
    CHECK(strcmp(c.env_options[0].key, "sticky_prob") == 0 && c.env_options[0].value == 0.0);
    override_ok(&c, "env_options.sticky_prob=0.5"); /* replaces, does not append */
    CHECK_EQ_INT(c.n_env_options, 1);
    CHECK(c.env_options[0].value == 0.5);
    override_ok(&c, "ga.elitism=false");
    CHECK_EQ_INT(c.ga.elitism, 0);
    override_ok(&c, "algo=es");
    CHECK(strcmp(c.algo, "es") == 0);
    override_ok(&c, "seed=9007199254740993"); /* above 2^53: kept exactly */
    CHECK(c.seed == 9007199254740993ull);
    override_ok(&c, "es={\"sigma\": 0.3, \"lr\": 0.1}");
    CHECK(c.es.sigma == 0.3 && c.es.lr == 0.1);

    const char *m = override_fails(&c, "population");
    CHECK_CONTAINS(m, "not of the form key=value");
    m = override_fails(&c, "=5");
    CHECK_CONTAINS(m, "not of the form key=value");
    m = override_fails(&c, "ga.sigam=0.1");
    CHECK_CONTAINS(m, "command-line override 'ga.sigam=0.1'");
    CHECK_CONTAINS(m, "did you mean 'ga.sigma'");
    m = override_fails(&c, "population=abc");
    CHECK_CONTAINS(m, "population must be an integer, got a string");
    m = override_fails(&c, "population=0");
    CHECK_CONTAINS(m, "population = 0 is out of range");
    m = override_fails(&c, "ga.sigma=");
    CHECK_CONTAINS(m, "ga.sigma must be a number");
    m = override_fails(&c, "algo=sgd");
    CHECK_CONTAINS(m, "is not one of ga|es|rs");
}

TEST(config_cross_checks) {
    NevoConfig c;
    NevoError err = {0};
    nevo_config_defaults(&c);
    override_ok(&c, "population=10");
    override_ok(&c, "ga.truncation=11");
    CHECK(nevo_config_check(&c, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "ga.truncation (11) must not exceed population (10)");
    override_ok(&c, "ga.truncation=10"); /* equal is fine */
    CHECK(nevo_config_check(&c, &err) == NEVO_OK);

    nevo_config_defaults(&c);
    override_ok(&c, "algo=es");
    override_ok(&c, "population=9");
    memset(&err, 0, sizeof err);
    CHECK(nevo_config_check(&c, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "population must be even");
    CHECK_CONTAINS(err.msg, "got 9");
    override_ok(&c, "population=1");
    CHECK(nevo_config_check(&c, &err) == NEVO_ERR_INVALID);
    override_ok(&c, "population=10");
    CHECK(nevo_config_check(&c, &err) == NEVO_OK);
}

/* The schema printout names every key with its default. */
TEST(config_print_schema) {
    char path[1024];
    snprintf(path, sizeof path, "%s/schema.txt", test_tmpdir());
    FILE *f = fopen(path, "w");
    CHECK(f);
    nevo_config_print_schema(f);
    fclose(f);
    char *text = test_read_file(path, NULL);
    CHECK(text);
    static const char *const keys[] = {"env", "algo", "seed", "population", "policy.hidden",
                                       "policy.conv_filters", "ga.sigma", "ga.elitism",
                                       "es.obs_norm_prob", "env_options.NAME"};
    for (int i = 0; i < (int)(sizeof keys / sizeof keys[0]); i++) CHECK_CONTAINS(text, keys[i]);
    CHECK_CONTAINS(text, "(default 0.002)");
    CHECK_CONTAINS(text, "(default [64,64])");
    free(text);
}

/* to_json -> apply on fresh defaults -> to_json gives the same text. */
static void check_roundtrip(const NevoConfig *c, const char *what) {
    char *j1 = nevo_config_to_json(c);
    CHECK(j1);
    NevoConfig back;
    nevo_config_defaults(&back);
    NevoError err = {0};
    NevoStatus st = nevo_config_apply_json(&back, j1, "dump", &err);
    CHECK_MSG(st == NEVO_OK, "%s: re-applying the dump failed: %s", what, err.msg);
    char *j2 = nevo_config_to_json(&back);
    CHECK_MSG(strcmp(j1, j2) == 0, "%s: dump changed:\n%s\nvs\n%s", what, j1, j2);
    free(j1);
    free(j2);
}

TEST(config_to_json_roundtrip) {
    NevoConfig c;
    nevo_config_defaults(&c);
    check_roundtrip(&c, "defaults");

    /* non-default values everywhere, including doubles that need 17 digits */
    override_ok(&c, "env=Pendulum-v1");
    override_ok(&c, "algo=es");
    override_ok(&c, "seed=4611686018427387905");
    override_ok(&c, "policy.hidden=[3,1,4,1,5]");
    override_ok(&c, "policy.activation=relu");
    override_ok(&c, "ga.sigma=0.1");
    override_ok(&c, "es.lr=0.3333333333333333");
    override_ok(&c, "es.obs_norm=false");
    override_ok(&c, "env_options.sticky_prob=0.1");
    override_ok(&c, "env_options.difficulty=3");
    check_roundtrip(&c, "non-default");
    char *json = nevo_config_to_json(&c);
    NevoConfig back;
    nevo_config_defaults(&back);
    NevoError err = {0};
    CHECK(nevo_config_apply_json(&back, json, "dump", &err) == NEVO_OK);
    free(json);
    CHECK(back.seed == 4611686018427387905ull);
    CHECK(back.ga.sigma == 0.1 && back.es.lr == 0.3333333333333333);
    CHECK_EQ_INT(back.policy.n_hidden, 5);
    CHECK_EQ_INT(back.policy.hidden[4], 5);
    CHECK_EQ_INT(back.es.obs_norm, 0);
    CHECK_EQ_INT(back.n_env_options, 2);
    CHECK(back.env_options[0].value == 0.1 && back.env_options[1].value == 3.0);

    /* a full conv stack round-trips */
    nevo_config_defaults(&c);
    override_ok(&c, "policy.conv_filters=[16,8]");
    override_ok(&c, "policy.conv_kernels=[3,2]");
    override_ok(&c, "policy.conv_strides=[1,2]");
    check_roundtrip(&c, "conv stack");
}

/* Policy files and checkpoints store nevo_config_to_json and re-apply it on load, so
 * every config a run accepts must survive the round trip. A conv stack given by its
 * filters alone (kernels and strides take their defaults, 3 and 1, in policy.c) is
 * accepted, but the dump writes the unset kernels and strides as 0, which the schema
 * (kernels 1..15, strides 1..8) then rejects. */
TEST(config_roundtrip_conv_filters_only) {
    NevoConfig c;
    nevo_config_defaults(&c);
    override_ok(&c, "policy.conv_filters=[16]");
    NevoError err = {0};
    CHECK(nevo_config_check(&c, &err) == NEVO_OK);
    check_roundtrip(&c, "conv_filters only");
}

/* The three conv lists share one count (policy.n_conv), so lists of different lengths
 * silently truncate or pad each other depending on key order: filters [16, 32] then
 * kernels [3] leaves a one-layer stack. Mismatched lengths must be an error (at apply or
 * at nevo_config_check), or the stack must keep both layers. */
TEST(config_conv_list_lengths_must_agree) {
    NevoConfig c;
    nevo_config_defaults(&c);
    override_ok(&c, "policy.conv_filters=[16,32]");
    NevoError err = {0};
    NevoStatus st = nevo_config_override(&c, "policy.conv_kernels=[3]", &err);
    if (st == NEVO_OK) st = nevo_config_check(&c, &err);
    CHECK_MSG(st != NEVO_OK || c.policy.n_conv == 2,
              "conv_filters=[16,32] + conv_kernels=[3] accepted as a %d-layer stack", c.policy.n_conv);

    /* the other order: filters [16] after kernels [3, 3] leaves a layer with 0 filters */
    nevo_config_defaults(&c);
    override_ok(&c, "policy.conv_kernels=[3,3]");
    memset(&err, 0, sizeof err);
    st = nevo_config_override(&c, "policy.conv_filters=[16]", &err);
    if (st == NEVO_OK) st = nevo_config_check(&c, &err);
    int zero_filters = 0;
    for (int i = 0; i < c.policy.n_conv; i++) zero_filters += c.policy.conv_filters[i] == 0;
    CHECK_MSG(st != NEVO_OK || zero_filters == 0,
              "conv_kernels=[3,3] + conv_filters=[16] accepted with %d layer(s) of 0 filters",
              zero_filters);
}

/* The schema gives seeds the whole u64 range (a library caller may set any seed), but
 * the dump writes seeds >= 2^63 as negative JSON integers, which re-applying rejects.
 * Either the seed survives the round trip or nevo_config_check refuses it up front. */
TEST(config_roundtrip_large_seed) {
    NevoConfig c;
    nevo_config_defaults(&c);
    c.seed = 0xFEDCBA9876543210ull;
    NevoError err = {0};
    if (nevo_config_check(&c, &err) != NEVO_OK) return; /* refused up front: fine */
    char *json = nevo_config_to_json(&c);
    NevoConfig back;
    nevo_config_defaults(&back);
    NevoStatus st = nevo_config_apply_json(&back, json, "dump", &err);
    free(json);
    CHECK_MSG(st == NEVO_OK, "seed 0xFEDCBA9876543210 does not survive the dump: %s", err.msg);
    CHECK(back.seed == 0xFEDCBA9876543210ull);
}
