/* Tests for run configuration (src/core/config.c, include/nevo/config.h): defaults,
 * loading JSON files, every class of bad input with the content of its message,
 * `key=value` overrides, cross-key checks and the JSON dump, which policy files and
 * checkpoints store and re-apply, so it must round-trip. */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strutil.h"
#include "harness.h"
#include "nevo/algo.h"
#include "nevo/config.h"
#include "nevo/noise.h"
#include "nevo/policy.h"
#include "nevo/env.h"

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
    {
        char doc[600] = "{\"policy\": {\"hidden\": [1";
        for (int i = 1; i <= NEVO_MAX_LAYERS; i++) strcat(doc, ",1");
        strcat(doc, "]}}");
        m = apply_fails(doc);
        char want[80];
        snprintf(want, sizeof want, "policy.hidden has %d entries, at most %d allowed", NEVO_MAX_LAYERS + 1,
                 NEVO_MAX_LAYERS);
        CHECK_CONTAINS(m, want);
    }
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

/* max_wall_s: seconds >= 0 (0 = no budget), a finite number; a config built in code
 * with NaN is refused by the check as a file's would be. */
TEST(config_max_wall_s) {
    NevoConfig c;
    nevo_config_defaults(&c);
    CHECK(c.max_wall_s == 0.0);
    override_ok(&c, "max_wall_s=3600");
    CHECK(c.max_wall_s == 3600.0);
    override_ok(&c, "max_wall_s=0.5");
    CHECK(c.max_wall_s == 0.5);
    CHECK_CONTAINS(apply_fails("{\"max_wall_s\": -1}"), "max_wall_s = -1 is out of range: it must be >= 0");
    CHECK_CONTAINS(apply_fails("{\"max_wall_s\": \"1h\"}"), "max_wall_s must be a number, got a string");
    CHECK_CONTAINS(override_fails(&c, "max_wall_s=NaN"), "max_wall_s must be a number, got a string");
    NevoError err = {0};
    c.max_wall_s = NAN;
    CHECK(nevo_config_check(&c, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "max_wall_s must be a finite number");
}

/* The algorithm's name is the registry's to check (nevo_algo_check), with a suggestion
 * where one is close. */
static void check_one_line(const char *msg);

static const char *algo_fails(const char *name) {
    static NevoError err;
    NevoConfig c;
    nevo_config_defaults(&c);
    CHECK(nevo_config_override(&c, name, &err) == NEVO_OK);
    CHECK(nevo_config_check(&c, &err) == NEVO_OK);
    memset(&err, 0, sizeof err);
    CHECK(nevo_algo_check(&c, NULL, &err) == NEVO_ERR_NOTFOUND);
    check_one_line(err.msg);
    return err.msg;
}

TEST(config_invalid_choice) {
    const char *m = algo_fails("algo=adam");
    CHECK_CONTAINS(m, "algo = 'adam' is not one of ga, rs, ga-ns, es, ns-es, nsr-es, nsra-es, sgd");
    m = algo_fails("algo=gaa");
    CHECK_CONTAINS(m, "(did you mean ga?)");
    m = algo_fails("algo=cma-es");
    CHECK_CONTAINS(m, "is not one of");
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
}

TEST(config_cross_checks) {
    NevoConfig c;
    NevoError err = {0};
    nevo_config_defaults(&c);
    override_ok(&c, "population=10");
    override_ok(&c, "ga.truncation=11");
    CHECK(nevo_config_check(&c, &err) == NEVO_OK); /* the algorithm's rule, not the schema's */
    CHECK(nevo_algo_check(&c, NULL, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "ga.truncation (11) must not exceed population (10)");
    override_ok(&c, "algo=rs"); /* random search keeps no parents */
    CHECK(nevo_algo_check(&c, NULL, &err) == NEVO_OK);
    override_ok(&c, "algo=ga");
    override_ok(&c, "ga.truncation=10"); /* equal is fine */
    CHECK(nevo_algo_check(&c, NULL, &err) == NEVO_OK);

    nevo_config_defaults(&c);
    override_ok(&c, "algo=es");
    override_ok(&c, "population=9");
    memset(&err, 0, sizeof err);
    CHECK(nevo_algo_check(&c, NULL, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "population must be even");
    CHECK_CONTAINS(err.msg, "got 9");
    override_ok(&c, "population=1");
    CHECK(nevo_algo_check(&c, NULL, &err) == NEVO_ERR_INVALID);
    override_ok(&c, "population=10");
    CHECK(nevo_algo_check(&c, NULL, &err) == NEVO_OK);
    override_ok(&c, "algo=nsr-es");
    /* novelty search needs an env with a behaviour characterisation */
    NevoEnvSpec spec = {.name = "CartPole-v1", .bc_dim = 0};
    CHECK(nevo_algo_check(&c, &spec, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "needs a behaviour characterisation");
    spec.bc_dim = 2;
    CHECK(nevo_algo_check(&c, &spec, &err) == NEVO_OK);
    /* the factored forward runs low-rank members of a feed-forward policy on the CPU */
    nevo_config_defaults(&c);
    override_ok(&c, "algo=es");
    override_ok(&c, "es.factored=true");
    CHECK(nevo_algo_check(&c, NULL, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "es.factored runs low-rank members: set es.rank");
    override_ok(&c, "es.rank=2");
    CHECK(nevo_algo_check(&c, NULL, &err) == NEVO_OK);
    override_ok(&c, "policy.lstm=8");
    CHECK(nevo_algo_check(&c, NULL, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "feed-forward policy");
    /* the GA's low-rank mutations: plain mutations of parents; factored children likewise */
    nevo_config_defaults(&c);
    override_ok(&c, "algo=ga");
    override_ok(&c, "ga.factored=true");
    CHECK(nevo_algo_check(&c, NULL, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "ga.factored runs low-rank children: set ga.rank");
    override_ok(&c, "ga.rank=1");
    CHECK(nevo_algo_check(&c, NULL, &err) == NEVO_OK);
    override_ok(&c, "policy.lstm=8");
    CHECK(nevo_algo_check(&c, NULL, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "ga.factored needs an env");
    override_ok(&c, "policy.lstm=0");
    override_ok(&c, "ga.mutation=sm-r");
    CHECK(nevo_algo_check(&c, NULL, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "a safe mutation scales full-rank noise");
    override_ok(&c, "ga.mutation=plain");
    override_ok(&c, "algo=rs");
    CHECK(nevo_algo_check(&c, NULL, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "random search draws every network fresh");
    CHECK(nevo_config_override(&c, "ga.rank=65", &err) != NEVO_OK);
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
    CHECK_CONTAINS(text, "Adam beta1 (default 0.9)"); /* the shortest text of the double, not 0.90000000000000002 */
    CHECK_CONTAINS(text, "(default 1e-08)");
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

/* Messages are one line whatever they echo: no byte below 0x20, no DEL. */
static void check_one_line(const char *msg) {
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++)
        CHECK_MSG(*p >= 0x20 && *p != 0x7F, "message has control byte 0x%02X: \"%s\"", *p, msg);
}

/* An override whose value is not UTF-8 (`env=` then byte 0xFF): json_string() refuses
 * it and returned NULL, which the type check then dereferenced (a segfault). */
TEST(config_override_value_not_utf8) {
    NevoConfig c;
    nevo_config_defaults(&c);
    const char *m = override_fails(&c, "env=\xff");
    CHECK_CONTAINS(m, "not valid UTF-8");
    CHECK_CONTAINS(m, "env=\\xFF");
    check_one_line(m);
    m = override_fails(&c, "env_options.x=\xc3\x28"); /* a cut two-byte sequence */
    CHECK_CONTAINS(m, "not valid UTF-8");
    m = override_fails(&c, "ga.sigma=0.1\xff");
    CHECK_CONTAINS(m, "not valid UTF-8");
    CHECK(strcmp(c.env, "CartPole-v1") == 0); /* nothing applied */
}

/* Step sizes of 0 (or -0, or a subnormal like 1e-310) passed the schema; es.sigma = 0
 * then made ES divide by zero (NaN, exit 1, files written). They are refused, and a
 * subnormal is refused for every number. */
TEST(config_zero_and_subnormal_numbers_refused) {
    static const char *bad[][2] = {
        {"es.sigma=0", "es.sigma = 0 is out of range"},      {"es.sigma=-0", "es.sigma = 0 is out of range"},
        {"es.sigma=-0.0", "es.sigma = -0 is out of range"},  {"es.sigma=1e-310", "es.sigma = 1e-310"},
        {"ga.sigma=0", "ga.sigma = 0 is out of range"},      {"ga.sigma=5e-9", "ga.sigma = 5e-09 is out of range"},
        {"es.lr=0", "es.lr = 0 is out of range"},            {"es.l2=1e-310", "subnormal"},
        {"es.beta1=4e-320", "subnormal"},                    {"es.reward_shift=1e-308", "subnormal"},
        {"ns.weight_delta=2e-310", "subnormal"},             {"env_options.sticky_prob=1e-310", "normal number"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        NevoConfig c;
        nevo_config_defaults(&c);
        const char *m = override_fails(&c, bad[i][0]);
        CHECK_CONTAINS(m, bad[i][1]);
    }
    const char *m = apply_fails("{\"es\": {\"sigma\": 0.0}}");
    CHECK_CONTAINS(m, "es.sigma = 0 is out of range");
    /* what remains allowed: 0 where it means "none", the smallest step sizes */
    NevoConfig c;
    nevo_config_defaults(&c);
    override_ok(&c, "es.l2=0");
    override_ok(&c, "es.l2=-0.0");
    CHECK(c.es.l2 == 0.0 && !signbit(c.es.l2)); /* -0 is stored as 0 */
    override_ok(&c, "es.sigma=1e-8");
    override_ok(&c, "ga.sigma=1e-8");
    override_ok(&c, "es.lr=1e-8");
    override_ok(&c, "env_options.sticky_prob=-0.0");
    CHECK(!signbit(c.env_options[0].value));
    NevoError err = {0};
    CHECK(nevo_config_check(&c, &err) == NEVO_OK);
}

/* nevo_config_check validates every key again, so a config read back from a crafted
 * file (or built in code) cannot carry a value the schema refuses, nor conv lists of
 * different lengths, into network construction (a zero stride was a SIGFPE there). */
TEST(config_check_revalidates_every_key) {
    NevoConfig c;
    NevoError err = {0};
#define EXPECT_REFUSED(mutation, needle)                                                        \
    do {                                                                                        \
        nevo_config_defaults(&c);                                                               \
        mutation;                                                                               \
        memset(&err, 0, sizeof err);                                                            \
        CHECK_MSG(nevo_config_check(&c, &err) == NEVO_ERR_INVALID, "accepted: %s", #mutation); \
        CHECK_CONTAINS(err.msg, needle);                                                        \
        check_one_line(err.msg);                                                                \
    } while (0)
    EXPECT_REFUSED(c.es.sigma = 0, "es.sigma");
    EXPECT_REFUSED(c.es.lr = NAN, "es.lr must be a finite number");
    EXPECT_REFUSED(c.ga.sigma = 5e-324, "ga.sigma");
    EXPECT_REFUSED(c.es.l2 = 1e-310, "subnormal");
    EXPECT_REFUSED(c.population = 0, "population = 0");
    EXPECT_REFUSED(c.ga.elitism = 7, "ga.elitism");
    EXPECT_REFUSED(c.algo[0] = '\0', "algo must be a non-empty string");
    EXPECT_REFUSED(memset(c.env, 'A', sizeof c.env), "env must be a non-empty string");
    EXPECT_REFUSED(c.env[0] = '\0', "env must be a non-empty string");
    EXPECT_REFUSED(c.policy.n_hidden = NEVO_MAX_LAYERS + 1, "policy.hidden has 129 entries");
    EXPECT_REFUSED(c.policy.n_hidden = -1, "policy.hidden has -1 entries");
    EXPECT_REFUSED(c.policy.hidden[1] = 0, "policy.hidden[1] = 0");
    EXPECT_REFUSED((c.policy.n_conv = 2, c.policy.conv_filters[0] = c.policy.conv_filters[1] = 4,
                    c.policy.n_conv_strides = 1, c.policy.conv_strides[0] = 1),
                   "policy.conv_strides");
    EXPECT_REFUSED((c.policy.n_conv = 1, c.policy.conv_filters[0] = 4, c.policy.n_conv_kernels = 1),
                   "policy.conv_kernels[0] = 0");
    EXPECT_REFUSED(c.n_env_options = NEVO_ENV_MAX_OPTIONS + 1, "env_options");
    EXPECT_REFUSED((c.n_env_options = 1, strcpy(c.env_options[0].key, "k"), c.env_options[0].value = INFINITY),
                   "env_options.k");
    EXPECT_REFUSED((c.n_env_options = 2, strcpy(c.env_options[0].key, "k"), strcpy(c.env_options[1].key, "k")),
                   "given twice");
    EXPECT_REFUSED((c.n_env_options = 1, memset(c.env_options[0].key, 'k', sizeof c.env_options[0].key)),
                   "unterminated");
#undef EXPECT_REFUSED
    nevo_config_defaults(&c);
    CHECK(nevo_config_check(&c, &err) == NEVO_OK);
}

/* A key, value or env name holding a newline (or any control byte, or bytes that are
 * not UTF-8) made a two-line message; every message now escapes them as \xNN. */
TEST(config_messages_escape_control_bytes) {
    const char *m = apply_fails("{\"gen\\nerations\": 3}");
    CHECK_CONTAINS(m, "unknown key 'gen\\x0Aerations'");
    check_one_line(m);
    m = algo_fails("algo=g\ta\x7f");
    CHECK_CONTAINS(m, "algo = 'g\\x09a\\x7F' is not one of");
    NevoConfig c;
    nevo_config_defaults(&c);
    m = override_fails(&c, "po\rpulation=3");
    CHECK_CONTAINS(m, "'po\\x0Dpulation'");
    check_one_line(m);
    /* the same through nevo_error and nevo_error_prefix for any message */
    NevoError err = {0};
    nevo_error(&err, NEVO_ERR_IO, "cannot read %s", "a\nb\x1b[31m.json");
    CHECK(strcmp(err.msg, "cannot read a\\x0Ab\\x1B[31m.json") == 0);
    nevo_error_prefix(&err, "%s: ", "dir\n");
    CHECK_MSG(strcmp(err.msg, "dir\\x0A: cannot read a\\x0Ab\\x1B[31m.json") == 0, "%s", err.msg);
}

/* nevo_escape keeps valid UTF-8, escapes what is not (stray continuation bytes,
 * overlong forms, surrogates, code points past U+10FFFF, cut sequences) and truncates
 * only between characters or escapes. */
TEST(config_escape_utf8) {
    char out[64];
    CHECK(strcmp(nevo_escape(out, sizeof out, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
                 "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == 0);
    CHECK(strcmp(nevo_escape(out, sizeof out, "\x80x"), "\\x80x") == 0);
    CHECK(strcmp(nevo_escape(out, sizeof out, "\xc0\xaf"), "\\xC0\\xAF") == 0);         /* overlong '/' */
    CHECK(strcmp(nevo_escape(out, sizeof out, "\xed\xa0\x80"), "\\xED\\xA0\\x80") == 0); /* surrogate */
    CHECK(strcmp(nevo_escape(out, sizeof out, "\xf4\x90\x80\x80"), "\\xF4\\x90\\x80\\x80") == 0);
    CHECK(strcmp(nevo_escape(out, sizeof out, "\xe2\x82"), "\\xE2\\x82") == 0); /* cut short */
    CHECK(strcmp(nevo_escape(out, sizeof out, "\xff"), "\\xFF") == 0);
    CHECK(strcmp(nevo_escape(out, 6, "ab\ncd"), "ab") == 0);        /* "\x0A" does not fit whole */
    CHECK(strcmp(nevo_escape(out, 4, "a\xc3\xa9\xc3\xa9"), "a\xc3\xa9") == 0); /* nor a half é */
    CHECK(strcmp(nevo_escape(out, 1, "abc"), "") == 0);
}

/* Checkpoints whose config asked for a huge truncation, or policy files asking for
 * 65536-wide layers, allocated gigabytes; loads and runs now check the parameter count
 * and the memory a config needs against a stated limit first. */
TEST(config_memory_bound) {
    NevoConfig c;
    nevo_config_defaults(&c);
    NevoError err = {0};
    setenv("NEVO_MAX_MEMORY_MB", "512", 1);
    CHECK(nevo_algo_check_memory(&c, 4610, &err) == NEVO_OK);
    double small = nevo_algo_memory_bytes(&c, 4610);
    CHECK(small >= 4.0 * NEVO_NOISE_MIN_FLOATS && small < 64e6);
    c.population = 10000000;
    c.ga.truncation = 10000000;
    CHECK(nevo_config_check(&c, &err) == NEVO_OK); /* a valid config ... */
    CHECK(nevo_algo_memory_bytes(&c, 4610) > 2 * 1e7 * 4610 * 4.0);
    CHECK(nevo_algo_check_memory(&c, 4610, &err) == NEVO_ERR_INVALID); /* ... too big for 512 MiB */
    CHECK_CONTAINS(err.msg, "GiB");
    CHECK_CONTAINS(err.msg, "NEVO_MAX_MEMORY_MB");
    check_one_line(err.msg);
    /* ES counts its agents' parameters and Adam moments */
    nevo_config_defaults(&c);
    override_ok(&c, "algo=nsr-es");
    override_ok(&c, "ns.meta_population=1000");
    CHECK(nevo_algo_check_memory(&c, 100000, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "agents");
    setenv("NEVO_MAX_MEMORY_MB", "65536", 1);
    CHECK(nevo_algo_check_memory(&c, 100000, &err) == NEVO_OK);
    /* the parameter count alone: the noise table (at most 2^28 floats) must exceed it */
    nevo_config_defaults(&c);
    CHECK(nevo_config_check_params(NEVO_NOISE_MAX_FLOATS - 1, &err) == NEVO_OK);
    CHECK(nevo_config_check_params(NEVO_NOISE_MAX_FLOATS, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "parameters");
    CHECK(nevo_algo_check_memory(&c, (size_t)1 << 40, &err) == NEVO_ERR_INVALID);
    /* a malformed limit is an error, not ignored */
    setenv("NEVO_MAX_MEMORY_MB", "lots", 1);
    CHECK(nevo_algo_check_memory(&c, 4610, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "NEVO_MAX_MEMORY_MB='lots'");
    unsetenv("NEVO_MAX_MEMORY_MB");
}

/* Every committed config (the .json files in configs/) loads and passes what `nevo train` checks
 * before it builds: its keys and values, the algorithm against its env, the network
 * and the memory its state needs (dataset configs: the keys and values). */
TEST(config_every_committed_config_is_valid) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/../../configs", test_data_dir());
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "no configs directory at %s", dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        NevoConfig cfg;
        NevoError err = {0};
        NevoStatus st = nevo_config_load(&cfg, path, &err);
        if (st == NEVO_OK) st = nevo_config_check(&cfg, &err);
        if (st == NEVO_OK && !cfg.dataset[0]) {
            NevoEnv *env = NULL;
            NevoPolicy *pol = NULL;
            st = nevo_env_new(cfg.env, cfg.env_options, cfg.n_env_options, &env, &err);
            if (st == NEVO_OK) {
                nevo_env_set_max_steps(env, cfg.max_episode_steps);
                st = nevo_algo_check(&cfg, nevo_env_spec(env), &err);
            }
            if (st == NEVO_OK) st = nevo_policy_new(nevo_env_spec(env), &cfg.policy, nevo_algo_obs_norm(&cfg), &pol, &err);
            if (st == NEVO_OK) st = nevo_algo_check_memory(&cfg, pol->nparams, &err);
            if (pol) nevo_policy_free(pol);
            if (env) nevo_env_free(env);
        }
        CHECK_MSG(st == NEVO_OK, "%s: %s", e->d_name, err.msg);
        n++;
    }
    if (d) closedir(d);
    CHECK_MSG(n >= 40, "only %d configs found in %s", n, dir);
}
