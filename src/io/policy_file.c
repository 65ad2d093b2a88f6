/* Standalone policy files. Payload: config JSON | nparams u64 | theta f32[nparams] |
 * obs_norm u32 | obs_mean f32[obs_dim] | obs_std f32[obs_dim]. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nevo/policy_file.h"
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

NevoStatus nevo_loaded_policy_network(NevoLoadedPolicy *lp, int obs_norm, NevoError *err) {
    NevoEnvSpec data_spec;
    const NevoEnvSpec *spec;
    NevoStatus st;
    if (lp->cfg.dataset[0]) {
        /* a classifier: its input and output sizes are its dataset's (one sample each
         * split is enough to know them) */
        st = nevo_dataset_load(lp->cfg.dataset, 1, 1, &lp->data, err);
        if (st) return st;
        nevo_dataset_env_spec(lp->data, &data_spec);
        spec = &data_spec;
    } else {
        st = nevo_env_new(lp->cfg.env, lp->cfg.env_options, lp->cfg.n_env_options, &lp->env, err);
        if (st) return st;
        spec = nevo_env_spec(lp->env);
    }
    return nevo_policy_new(spec, &lp->cfg.policy, obs_norm, &lp->policy, err);
}

/* Checks the config stored in a file and builds its env and network (no parameters
 * yet: the payload's size is checked against the network first). */
static NevoStatus build_from_config(const char *path, NevoLoadedPolicy *out, NevoError *err) {
    NevoStatus st = nevo_config_check(&out->cfg, err);
    if (st == NEVO_OK) st = nevo_loaded_policy_network(out, 0, err);
    if (st == NEVO_OK) st = nevo_config_check_params(out->policy->nparams, err);
    if (st != NEVO_OK) nevo_error_prefix(err, "%s: ", path);
    return st;
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
        st = nevo_error(err, NEVO_ERR_CORRUPT, "%s: policy file is truncated or malformed", path);
    } else {
        st = nevo_config_apply_json(&out->cfg, json, path, err);
    }
    free(json);
    if (st == NEVO_OK) st = build_from_config(path, out, err);
    if (st == NEVO_OK) {
        NevoPolicy *p = out->policy;
        uint64_t np = nevo_read_u64(&r);
        size_t od = (size_t)p->obs_dim;
        /* the rest must be exactly theta, two u32 and the normalisation: checked before
         * anything is allocated for it */
        size_t want = 4 * p->nparams + 8 + 8 * od;
        if (!nevo_reader_ok(&r, false) || np != p->nparams) {
            st = nevo_error(err, NEVO_ERR_CORRUPT, "%s: holds %llu parameters but its network needs %zu",
                            path, (unsigned long long)np, p->nparams);
        } else if (r.len - r.pos != want) {
            st = nevo_error(err, NEVO_ERR_CORRUPT,
                            "%s: policy payload has the wrong length (%zu bytes after the config, %zu expected)",
                            path, r.len - r.pos + 8, want + 8);
        } else {
            out->theta = nevo_alloc_aligned(sizeof(float) * p->nparams);
            nevo_read_f32s(&r, out->theta, p->nparams);
            uint32_t norm = nevo_read_u32(&r);
            uint32_t file_od = nevo_read_u32(&r);
            size_t bad;
            if (norm > 1) {
                st = nevo_error(err, NEVO_ERR_CORRUPT, "%s: observation normalisation flag %u is not 0 or 1", path,
                                norm);
            } else if (file_od != (uint32_t)od) {
                st = nevo_error(err, NEVO_ERR_CORRUPT, "%s: observation size %u does not match the env's %d",
                                path, file_od, p->obs_dim);
            } else if ((bad = nevo_first_nonfinite(out->theta, p->nparams)) < p->nparams) {
                st = nevo_error(err, NEVO_ERR_CORRUPT, "%s: parameter %zu is not a finite number", path, bad);
            } else {
                p->obs_norm = (int)norm; /* the file's word, as it was trained */
                nevo_read_f32s(&r, p->obs_mean, od);
                nevo_read_f32s(&r, p->obs_std, od);
                for (size_t i = 0; i < od && st == NEVO_OK; i++)
                    if (!isfinite(p->obs_mean[i]) || !isfinite(p->obs_std[i]) || !(p->obs_std[i] > 0))
                        st = nevo_error(err, NEVO_ERR_CORRUPT,
                                        "%s: observation normalisation %zu (mean %g, std %g) is not a finite "
                                        "mean and a positive std",
                                        path, i, (double)p->obs_mean[i], (double)p->obs_std[i]);
                if (st == NEVO_OK && !nevo_reader_ok(&r, true))
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
    nevo_dataset_free(p->data);
    free(p->theta);
    p->policy = NULL;
    p->env = NULL;
    p->data = NULL;
    p->theta = NULL;
}
