/* Training checkpoints (the payload's layout is in checkpoint.h), and the loader of a
 * policy from either file. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nevo/checkpoint.h"
#include "nevo/io.h"

NevoStatus nevo_checkpoint_save(const char *path, const NevoConfig *cfg, const NevoRunTotals *totals,
                                const NevoAlgo *algo, NevoError *err) {
    NevoBuf b = {0};
    char *json = nevo_config_to_json(cfg);
    nevo_buf_str(&b, json);
    free(json);
    nevo_buf_u32(&b, (uint32_t)totals->generations);
    nevo_buf_u64(&b, (uint64_t)totals->frames);
    nevo_buf_u64(&b, (uint64_t)totals->episodes);
    nevo_buf_f64(&b, totals->wall_s);
    nevo_buf_f64(&b, totals->best_fitness);
    nevo_algo_save(algo, &b);
    NevoStatus st = nevo_container_write(path, NEVO_CHECKPOINT_MAGIC, NEVO_CHECKPOINT_VERSION, &b, err);
    nevo_buf_free(&b);
    return st;
}

/* Counters a checkpoint of this config can hold: a checkpoint is written after a
 * generation, never beyond the config's generations, with counts that only grow. */
static NevoStatus check_totals(const char *path, const NevoConfig *cfg, uint32_t generations, uint64_t frames,
                               uint64_t episodes, const NevoRunTotals *t, NevoError *err) {
    if (generations < 1 || generations > (uint32_t)cfg->generations)
        return nevo_error(err, NEVO_ERR_CORRUPT,
                          "%s: checkpoint counts %u generations done, outside 1..%d (its config's generations)", path,
                          generations, cfg->generations);
    /* an evolution generation ends at least one episode; a learner's may end none */
    const NevoAlgoInfo *algo = nevo_algo_find(cfg->algo);
    int learner = algo && (algo->flags & NEVO_ALGO_GRADIENT);
    if (frames > (uint64_t)INT64_MAX || episodes > (uint64_t)INT64_MAX || (!learner && episodes < generations))
        return nevo_error(err, NEVO_ERR_CORRUPT,
                          "%s: checkpoint counters are inconsistent (%llu frames, %llu episodes, %u generations)",
                          path, (unsigned long long)frames, (unsigned long long)episodes, generations);
    if (!isfinite(t->wall_s) || t->wall_s < 0 || isnan(t->best_fitness) || t->best_fitness == HUGE_VAL)
        return nevo_error(err, NEVO_ERR_CORRUPT, "%s: checkpoint holds wall time %g s and best fitness %g", path,
                          t->wall_s, t->best_fitness);
    return NEVO_OK;
}

NevoStatus nevo_checkpoint_read(const char *path, NevoConfig *cfg, NevoRunTotals *totals,
                                uint8_t **state, size_t *state_len, NevoError *err) {
    *state = NULL;
    *state_len = 0;
    memset(totals, 0, sizeof *totals);
    uint8_t *data;
    size_t n;
    NevoStatus st = nevo_read_all(path, &data, &n, err);
    if (st) return st;
    st = nevo_checkpoint_parse(data, n, path, cfg, totals, state, state_len, err);
    free(data);
    return st;
}

NevoStatus nevo_checkpoint_parse(const uint8_t *data, size_t n, const char *path, NevoConfig *cfg,
                                 NevoRunTotals *totals, uint8_t **state, size_t *state_len, NevoError *err) {
    *state = NULL;
    *state_len = 0;
    memset(totals, 0, sizeof *totals);
    const uint8_t *payload;
    size_t len;
    NevoStatus st = nevo_container_decode(data, n, path, NEVO_CHECKPOINT_MAGIC, NEVO_CHECKPOINT_VERSION, &payload,
                                          &len, err);
    if (st) return st;
    NevoReader r = nevo_reader(payload, len);
    char *json = nevo_read_str(&r, len);
    uint32_t generations = nevo_read_u32(&r);
    uint64_t frames = nevo_read_u64(&r), episodes = nevo_read_u64(&r);
    totals->generations = (int)(generations & 0x7FFFFFFFu);
    totals->frames = (long long)(frames & (uint64_t)INT64_MAX);
    totals->episodes = (long long)(episodes & (uint64_t)INT64_MAX);
    totals->wall_s = nevo_read_f64(&r);
    totals->best_fitness = nevo_read_f64(&r);
    if (!nevo_reader_ok(&r, false)) {
        st = nevo_error(err, NEVO_ERR_CORRUPT, "%s: checkpoint is truncated or malformed", path);
    } else {
        nevo_config_defaults(cfg);
        st = nevo_config_apply_json(cfg, json, path, err);
        if (st == NEVO_OK && ((st = nevo_config_check(cfg, err)) != NEVO_OK || (st = nevo_algo_check(cfg, NULL, err))))
            nevo_error_prefix(err, "%s: ", path);
        if (st == NEVO_OK) st = check_totals(path, cfg, generations, frames, episodes, totals, err);
    }
    free(json);
    if (st == NEVO_OK) {
        *state_len = len - r.pos;
        *state = nevo_alloc(*state_len ? *state_len : 1);
        memcpy(*state, payload + r.pos, *state_len);
    }
    return st;
}

NevoStatus nevo_checkpoint_restore(const char *path, NevoAlgo *algo, const uint8_t *state,
                                   size_t state_len, NevoError *err) {
    NevoReader r = nevo_reader(state, state_len);
    NevoStatus st = nevo_algo_load(algo, &r, err);
    if (st == NEVO_OK && !nevo_reader_ok(&r, true))
        st = nevo_error(err, NEVO_ERR_CORRUPT, "algorithm state has the wrong length");
    if (st) nevo_error_prefix(err, "%s: ", path);
    return st;
}

NevoStatus nevo_checkpoint_verify(const char *path, const NevoRunTotals *totals, const NevoAlgo *algo,
                                  const NevoPolicy *policy, NevoError *err) {
    int done = nevo_algo_generations_done(algo);
    if (done != totals->generations)
        return nevo_error(err, NEVO_ERR_CORRUPT,
                          "%s: the algorithm state has done %d generations, the checkpoint's counters %d", path, done,
                          totals->generations);
    float *theta = nevo_alloc_aligned(sizeof(float) * policy->nparams);
    nevo_algo_best(algo, theta);
    NevoStatus st = NEVO_OK;
    for (size_t i = 0; i < policy->nparams; i++)
        if (!isfinite(theta[i])) {
            st = nevo_error(err, NEVO_ERR_CORRUPT, "%s: the best policy's parameter %zu is not a finite number", path,
                            i);
            break;
        }
    free(theta);
    return st;
}

NevoStatus nevo_load_any_policy(const char *path, NevoLoadedPolicy *out, NevoError *err) {
    char magic[8];
    NevoStatus st = nevo_file_magic(path, magic, err);
    if (st) return st;
    if (memcmp(magic, NEVO_POLICY_MAGIC, 8) == 0) return nevo_policy_file_load(path, out, err);
    if (memcmp(magic, NEVO_CHECKPOINT_MAGIC, 8) != 0)
        return nevo_error(err, NEVO_ERR_CORRUPT, "%s: neither a nevo policy nor a checkpoint", path);
    memset(out, 0, sizeof *out);
    NevoRunTotals totals;
    uint8_t *state;
    size_t state_len;
    st = nevo_checkpoint_read(path, &out->cfg, &totals, &state, &state_len, err);
    if (st) return st;
    st = nevo_loaded_policy_network(out, nevo_algo_obs_norm(&out->cfg), err);
    if (st == NEVO_OK) st = nevo_algo_check(&out->cfg, out->env ? nevo_env_spec(out->env) : NULL, err);
    /* what rebuilding the algorithm allocates, bounded before it is */
    if (st == NEVO_OK) st = nevo_algo_check_memory(&out->cfg, out->policy->nparams, err);
    if (st) nevo_error_prefix(err, "%s: ", path);
    if (st == NEVO_OK) {
        NevoPool *pool = nevo_pool_new(nevo_cpu_count());
        size_t table = nevo_algo_noise_floats(&out->cfg, out->policy->nparams);
        NevoNoise *noise = nevo_noise_new(table, pool);
        NevoAlgo *algo;
        NevoDataView one = {0};
        if (out->data) { /* what a gradient algorithm is built over: the sample loaded */
            one = nevo_data_view(out->data, &out->data->train);
            st = nevo_algo_new_on_data(&out->cfg, &one, out->policy, noise, pool, &algo, err);
        } else {
            st = nevo_algo_new(&out->cfg, out->env, out->policy, noise, pool, &algo, err);
        }
        if (st == NEVO_OK) {
            st = nevo_checkpoint_restore(path, algo, state, state_len, err);
            if (st == NEVO_OK) st = nevo_checkpoint_verify(path, &totals, algo, out->policy, err);
            if (st == NEVO_OK) {
                out->theta = nevo_alloc_aligned(sizeof(float) * out->policy->nparams);
                nevo_algo_best(algo, out->theta);
            }
            nevo_algo_free(algo);
        }
        nevo_noise_free(noise);
        nevo_pool_free(pool);
    }
    free(state);
    if (st) nevo_loaded_policy_free(out);
    return st;
}
