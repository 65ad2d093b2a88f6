/* Standalone policy files. Payload: config JSON | nparams u64 | theta f32[nparams] |
 * obs_norm u32 | obs_mean f32[obs_dim] | obs_std f32[obs_dim]. */
#include <stdlib.h>
#include <string.h>

#include "nevo/files.h"
#include "nevo/io.h"

NevoStatus nevo_policy_file_save(const char *path, const NevoConfig *cfg, const NevoPolicy *policy,
                                 const float *theta, NevoError *err) {
    NevoBuf b = {0};
    char *json = nevo_config_to_json(cfg);
    nevo_buf_str(&b, json);
    free(json);
    nevo_buf_u64(&b, policy->nparams);
    nevo_buf_f32s(&b, theta, policy->nparams);
    nevo_buf_u32(&b, (uint32_t)policy->obs_norm);
    nevo_buf_u32(&b, (uint32_t)policy->obs_dim);
    nevo_buf_f32s(&b, policy->obs_mean, (size_t)policy->obs_dim);
    nevo_buf_f32s(&b, policy->obs_std, (size_t)policy->obs_dim);
    NevoStatus st = nevo_container_write(path, NEVO_POLICY_MAGIC, NEVO_POLICY_VERSION, &b, err);
    nevo_buf_free(&b);
    return st;
}

/* Builds env and network from a config stored in a file. */
static NevoStatus build_from_config(const char *path, NevoLoadedPolicy *out, NevoError *err) {
    NevoStatus st = nevo_env_new(out->cfg.env, out->cfg.env_options, out->cfg.n_env_options, &out->env, err);
    if (st == NEVO_OK)
        st = nevo_policy_new(nevo_env_spec(out->env), &out->cfg.policy, out->cfg.es.obs_norm &&
                             strcmp(out->cfg.algo, "es") == 0, &out->policy, err);
    if (st != NEVO_OK) {
        nevo_error_prefix(err, "%s: ", path);
        return st;
    }
    out->theta = nevo_alloc_aligned(sizeof(float) * out->policy->nparams);
    return NEVO_OK;
}

NevoStatus nevo_policy_file_load(const char *path, NevoLoadedPolicy *out, NevoError *err) {
    memset(out, 0, sizeof *out);
    uint8_t *payload;
    size_t len;
    NevoStatus st = nevo_container_read(path, NEVO_POLICY_MAGIC, NEVO_POLICY_VERSION, &payload, &len, err);
    if (st) return st;
    NevoReader r = nevo_reader(payload, len);
    char *json = nevo_read_str(&r, len);
    nevo_config_defaults(&out->cfg);
    if (!nevo_reader_ok(&r, false)) {
        st = nevo_error(err, NEVO_ERR_CORRUPT, "%s: policy file is truncated", path);
    } else {
        st = nevo_config_apply_json(&out->cfg, json, path, err);
    }
    free(json);
    if (st == NEVO_OK) st = build_from_config(path, out, err);
    if (st == NEVO_OK) {
        uint64_t np = nevo_read_u64(&r);
        if (np != out->policy->nparams) {
            st = nevo_error(err, NEVO_ERR_CORRUPT, "%s: holds %llu parameters but its network needs %zu",
                            path, (unsigned long long)np, out->policy->nparams);
        } else {
            nevo_read_f32s(&r, out->theta, out->policy->nparams);
            out->policy->obs_norm = (int)nevo_read_u32(&r);
            uint32_t od = nevo_read_u32(&r);
            if (od != (uint32_t)out->policy->obs_dim) {
                st = nevo_error(err, NEVO_ERR_CORRUPT, "%s: observation size %u does not match the env's %d",
                                path, od, out->policy->obs_dim);
            } else {
                nevo_read_f32s(&r, out->policy->obs_mean, od);
                nevo_read_f32s(&r, out->policy->obs_std, od);
                if (!nevo_reader_ok(&r, true))
                    st = nevo_error(err, NEVO_ERR_CORRUPT, "%s: policy payload has the wrong length", path);
            }
        }
    }
    free(payload);
    if (st) nevo_loaded_policy_free(out);
    return st;
}

void nevo_loaded_policy_free(NevoLoadedPolicy *p) {
    nevo_policy_free(p->policy);
    nevo_env_free(p->env);
    free(p->theta);
    p->policy = NULL;
    p->env = NULL;
    p->theta = NULL;
}
