/* Training checkpoints. Payload: config JSON | generations u32 | frames u64 |
 * episodes u64 | wall_s f64 | best_fitness f64 | algorithm state (the rest). */
#include <stdlib.h>
#include <string.h>

#include "nevo/files.h"
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

NevoStatus nevo_checkpoint_read(const char *path, NevoConfig *cfg, NevoRunTotals *totals,
                                uint8_t **state, size_t *state_len, NevoError *err) {
    *state = NULL;
    *state_len = 0;
    uint8_t *payload;
    size_t len;
    NevoStatus st = nevo_container_read(path, NEVO_CHECKPOINT_MAGIC, NEVO_CHECKPOINT_VERSION, &payload,
                                        &len, err);
    if (st) return st;
    NevoReader r = nevo_reader(payload, len);
    char *json = nevo_read_str(&r, len);
    totals->generations = (int)nevo_read_u32(&r);
    totals->frames = (long long)nevo_read_u64(&r);
    totals->episodes = (long long)nevo_read_u64(&r);
    totals->wall_s = nevo_read_f64(&r);
    totals->best_fitness = nevo_read_f64(&r);
    if (!nevo_reader_ok(&r, false)) {
        st = nevo_error(err, NEVO_ERR_CORRUPT, "%s: checkpoint is truncated", path);
    } else {
        nevo_config_defaults(cfg);
        st = nevo_config_apply_json(cfg, json, path, err);
    }
    free(json);
    if (st == NEVO_OK) {
        *state_len = len - r.pos;
        *state = nevo_alloc(*state_len ? *state_len : 1);
        memcpy(*state, payload + r.pos, *state_len);
    }
    free(payload);
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
    st = nevo_env_new(out->cfg.env, out->cfg.env_options, out->cfg.n_env_options, &out->env, err);
    if (st == NEVO_OK)
        st = nevo_policy_new(nevo_env_spec(out->env), &out->cfg.policy,
                             out->cfg.es.obs_norm && strcmp(out->cfg.algo, "es") == 0, &out->policy, err);
    if (st == NEVO_OK) {
        NevoPool *pool = nevo_pool_new(nevo_cpu_count());
        NevoEvaluator *ev = nevo_evaluator_new(out->env, out->policy, pool, 1);
        size_t table = out->cfg.noise_table_floats > 0 ? (size_t)out->cfg.noise_table_floats
                                                       : nevo_noise_auto_size(out->policy->nparams);
        NevoNoise *noise = nevo_noise_new(table, pool);
        NevoAlgo *algo;
        st = nevo_algo_new(&out->cfg, out->env, out->policy, noise, ev, &algo, err);
        if (st == NEVO_OK) {
            st = nevo_checkpoint_restore(path, algo, state, state_len, err);
            if (st == NEVO_OK) {
                out->theta = nevo_alloc_aligned(sizeof(float) * out->policy->nparams);
                nevo_algo_best(algo, out->theta);
            }
            nevo_algo_free(algo);
        }
        nevo_noise_free(noise);
        nevo_evaluator_free(ev);
        nevo_pool_free(pool);
    }
    free(state);
    if (st) nevo_loaded_policy_free(out);
    return st;
}
