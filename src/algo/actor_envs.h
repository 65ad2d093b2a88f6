/* What the actor-learners (algo vtrace, algo r2d2) share.
 *
 * The envs of a synchronous one: E instances of one env, each with its running return
 * and length and the counters that name its next episode's seed and its next action's
 * draw; their save into a checkpoint and the checked load, so a resumed sync run is the
 * same bits.
 *
 * A generation's figures: the returns of the episodes it finished and the runtime's.
 *
 * The validation of the learner's greedy policy (rl.validation_every generations, on
 * rl.validation_episodes episodes, the same episodes each time): the best-scoring
 * parameters are the run's policy, as the GA's elite is chosen on validation episodes. */
#ifndef NEVO_ACTOR_ENVS_H
#define NEVO_ACTOR_ENVS_H

#include <stdint.h>

#include "algo/algo_internal.h"
#include "nevo/env.h"
#include "nevo/io.h"
#include "nevo/seed.h"
#include "nevo/status.h"

typedef struct NevoActorEnvs {
    const NevoEnv *env;
    uint64_t seed;     /* the run's: names the episodes' seeds */
    int E, D;
    size_t isz;
    uint8_t *insts;    /* (E) instances */
    double *ret;       /* (E) the running episode's return */
    int *len;          /* (E) and length */
    uint32_t *ep;      /* (E) episodes begun: names the next one's seed */
    uint64_t *steps;   /* (E) actions taken: names the next action's draw */
} NevoActorEnvs;

/* E instances, each reset into its first episode: obs (E, D) its first observations. */
void nevo_actor_envs_init(NevoActorEnvs *s, const NevoEnv *env, int E, uint64_t seed, float *obs);
void nevo_actor_envs_free(NevoActorEnvs *s);
void *nevo_actor_env(const NevoActorEnvs *s, int e);
/* Env e begins its next episode (seed (run seed, NEVO_RNG_ACTOR_ENV, ep[e], e)): its
 * first observation into obs (D). */
void nevo_actor_envs_start(NevoActorEnvs *s, int e, float *obs);
/* Every env (instance, observation obs + e D, counters); the load checks each value and
 * sets the env through set_state (prefixing messages with what). */
void nevo_actor_envs_save(const NevoActorEnvs *s, const float *obs, NevoBuf *b);
NevoStatus nevo_actor_envs_load(NevoActorEnvs *s, NevoReader *r, float *obs, const char *what, NevoError *err);

typedef struct NevoRLGen {
    double *ret;           /* the returns of the episodes finished, in the order they ended */
    int n, cap;
    long long frames;      /* sync: the algorithm counts them; async: from the runtime */
    double last_mean;      /* the latest mean return (it stands through a generation where none ends) */
    double t0;             /* when the generation began */
    NevoSeedStats before;  /* async: the runtime's figures then */
} NevoRLGen;

/* A generation begins (seed: the async runtime, or NULL). */
void nevo_rl_gen_begin(NevoRLGen *g, const NevoSeed *seed);
void nevo_rl_gen_episode(NevoRLGen *g, double ret);
/* Its figures into stats: the runtime's since nevo_rl_gen_begin (async), or sync's
 * (frames over the wall time, one forward of E rows a step, no queue, no lag);
 * gen_updates (the learner's updates in this generation) over its wall time; updates
 * (so far) and lr the learner's; frames, episodes and the returns' best, median and
 * mean (elite_mean = mean). */
void nevo_rl_gen_stats(NevoRLGen *g, const NevoSeed *seed, long long updates, long long gen_updates, int E, double lr,
                       NevoGenStats *stats);
void nevo_rl_gen_free(NevoRLGen *g);

typedef struct NevoRLBest {
    int every, episodes;   /* rl.validation_every (0: off), rl.validation_episodes */
    uint64_t seed;         /* names the validation episodes */
    size_t np;
    double score;          /* the best validation mean so far (-inf: none yet) */
    double last;           /* the latest validation mean (-inf: none yet) */
    float *theta;          /* its parameters */
} NevoRLBest;

void nevo_rl_best_init(NevoRLBest *b, const NevoConfig *cfg, size_t np);
void nevo_rl_best_free(NevoRLBest *b);
/* After a generation of a (a->generation not yet counted) with parameters theta: where
 * one is due, the validation (its frames and episodes added to stats), kept where it
 * beats the best so far (ties keep the earlier); stats->elite_mean is then the latest
 * validation mean, once there is one. */
NevoStatus nevo_rl_best_after(NevoRLBest *b, const NevoAlgo *a, const float *theta, NevoGenStats *stats,
                              NevoError *err);
/* The run's policy: the best validated parameters, else theta (validation off, or none yet). */
const float *nevo_rl_best_params(const NevoRLBest *b, const float *theta);
/* The best score and parameters, where validation is on (nothing otherwise). */
void nevo_rl_best_save(const NevoRLBest *b, NevoBuf *buf);
NevoStatus nevo_rl_best_load(NevoRLBest *b, NevoReader *r, NevoError *err);

#endif
