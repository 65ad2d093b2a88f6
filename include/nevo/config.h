/* Run configuration: JSON files plus `key=value` overrides, checked against a schema.
 *
 * Every key has a type, a default, a range and a help line (the schema in config.c);
 * `nevo train --help` prints them. Nested objects are addressed with dotted keys
 * (`ga.sigma`). An unknown key is an error that suggests the closest valid key; so is a
 * wrong type or an out-of-range value. `env_options` is an open object of numeric
 * options checked by the environment itself. */
#ifndef NEVO_CONFIG_H
#define NEVO_CONFIG_H

#include <stdint.h>

#include "nevo/status.h"

/* hidden or conv layers of a policy: deep enough for the 100+-layer networks of the
 * safe-mutation experiments */
#define NEVO_MAX_LAYERS 128
#define NEVO_ENV_MAX_OPTIONS 16

/* A named numeric option of the env, from the config's env_options ("sticky_prob":
 * 0.1): the env checks its own. */
typedef struct NevoEnvOption {
    char key[48];
    double value;
} NevoEnvOption;

typedef struct NevoPolicyConfig {
    int n_hidden;
    int hidden[NEVO_MAX_LAYERS];   /* units per hidden dense layer */
    int n_conv;                        /* conv layers = entries of conv_filters */
    int conv_filters[NEVO_MAX_LAYERS]; /* conv stack for image observations */
    int n_conv_kernels, n_conv_strides; /* 0 (defaults 3 and 1) or n_conv */
    int conv_kernels[NEVO_MAX_LAYERS];
    int conv_strides[NEVO_MAX_LAYERS];
    char activation[16];           /* "tanh" or "relu" */
    char init[16];                 /* "scaled" (Uber GA) or "normc" (OpenAI ES) */
    int lstm;                      /* units of an LSTM layer before the output layer; 0 = none */
    int value_head;                /* 1: one more output, V(x), after the action outputs (actor-critic) */
} NevoPolicyConfig;

typedef struct NevoGAConfig {
    double sigma;              /* mutation power */
    double sigma_decay;        /* generation g mutates with max(sigma_min, sigma sigma_decay^g) */
    double sigma_min;
    int shared_episodes;       /* 1: every individual of a generation plays the same episode seeds */
    int truncation;            /* T parents */
    int elitism;               /* 1: copy the elite unmodified into the next generation */
    int validation_candidates; /* top-k re-evaluated to choose the elite */
    int validation_episodes;   /* episodes per candidate */
    char mutation[12];         /* "plain", "sm-g-sum", "sm-g-abs", "sm-g-so" or "sm-r" (safe
                                * mutations, Lehman et al. 2018) */
    int sm_states;             /* safe mutations: states of the parent's own episodes kept
                                * for its output gradients */
    int rank;                  /* low-rank mutations of this rank (params.h), 0 = full rank */
    int factored;              /* 1: the children run the factored forward (NEVO_NET_FACTORED) */
} NevoGAConfig;

typedef struct NevoESConfig {
    double sigma;
    double sigma_decay;   /* generation g perturbs with max(sigma_min, sigma sigma_decay^g) */
    double sigma_min;
    char optimizer[8];    /* "adam" or "sgd" */
    double lr;
    double l2;            /* L2 weight decay coefficient */
    double beta1, beta2;  /* Adam */
    double momentum;      /* SGD */
    int obs_norm;         /* observation normalisation on (1) / off (0) */
    double obs_norm_prob; /* fraction of rollouts whose observations update the statistics */
    int center_episodes;  /* episodes evaluating the current mean each generation (reporting) */
    char shaping[12];     /* "ranks" (centred ranks, OpenAI ES) or "reward_std" (raw
                           * rewards over their std, Mania et al.'s ARS; the NS family
                           * mixes reward and novelty z-scores) */
    int top_directions;   /* ARS's b: only the b pairs with the best max(r+, r-) step (0 = all) */
    double reward_shift;  /* ARS: subtracted per step from the perturbations' returns (the
                           * alive bonus of Hopper, Walker2d, Ant, Humanoid); 0 = none */
    int grad_cosine;      /* on a dataset: measure the cosine between each step's direction
                           * and the true gradient (Zhang et al. 2017) */
    int rank;             /* low-rank perturbations of this rank (EGGROLL; params.h), 0 = full rank */
    int factored;         /* 1: the members run the factored forward (NEVO_NET_FACTORED) */
} NevoESConfig;

/* Gradient optimiser (optim.h): algo sgd, and the learners built on gradients. */
typedef struct NevoOptimConfig {
    char name[12];        /* "sgd", "adam" or "rmsprop" */
    double lr;
    double momentum;      /* sgd (heavy ball) and rmsprop */
    double beta1, beta2;  /* adam */
    double decay;         /* rmsprop: decay of the mean square */
    double eps;           /* adam, rmsprop: added to the denominator */
    double weight_decay;  /* L2 coefficient added to the gradient */
    double clip_norm;     /* global gradient-norm clip (0 = none) */
    char lr_decay[8];     /* "none", or "linear": the actor-learners' lr falls linearly to 0
                           * over the run (max_frames, else generations) */
} NevoOptimConfig;

/* Supervised data (config key `dataset`): what a run trains and tests on. */
typedef struct NevoDataConfig {
    int train_samples;   /* the first N training samples (0 = all) */
    int test_samples;    /* the first N test samples (0 = all) */
    int batch;           /* algo sgd: mini-batch size */
    int fitness_batch;   /* evolution: samples behind each generation's fitness, the same for
                          * every member (0 = the whole training set) */
} NevoDataConfig;

/* Actor-learner RL (algo vtrace, algo r2d2): SEED RL's runtime, IMPALA's V-trace loss. */
typedef struct NevoRLConfig {
    char mode[8];         /* "sync": a fixed schedule of actor steps and learner updates,
                           * bit-identical; "async": actors, inference and learner run
                           * concurrently (faster, not reproducible) */
    int envs;             /* environment instances in all */
    int actors;           /* async: actor threads (0 = a quarter of the CPUs, at least 1) */
    int unroll;           /* T: steps per trajectory the learner trains on */
    int batch;            /* trajectories per learner step (sync: every env's, envs) */
    int steps_per_generation; /* learner steps per generation (a metrics line) */
    double discount;      /* gamma */
    double rho_bar, c_bar; /* V-trace's truncation levels */
    double baseline_cost; /* weight of the value loss 0.5 (v_s - V(x_s))^2 */
    double entropy_cost;  /* weight of the entropy bonus */
    double reward_clip;   /* rewards clipped to +-this (0 = none) */
    int queue;            /* async: trajectories the queue to the learner holds */
    int batch_wait_us;    /* async: how long the inference server waits to fill a batch */
    /* algo r2d2 (Kapturowski et al. 2019): replayed sequences of burn_in + unroll steps */
    int burn_in;          /* steps that only warm the LSTM state */
    int n_step;           /* n of the n-step double-Q targets */
    int period;           /* steps every env takes per learner step, and between sequence
                           * starts (0 = unroll / 2, rounded up) */
    int replay;           /* sequences the buffer holds */
    int replay_start;     /* sequences before the first update */
    int target_period;    /* updates between target-network copies */
    double priority_eta;  /* priority: eta max|delta| + (1 - eta) mean|delta| */
    double priority_exponent, is_exponent; /* sampling ~ priority^this; IS weights' exponent */
    double epsilon, epsilon_alpha; /* Ape-X's per-env exploration */
    double rescale_eps;   /* h's epsilon */
    int validation_every;   /* generations between validations of the greedy policy (0 = none) */
    int validation_episodes;/* episodes of each: the best validated parameters are the run's policy */
} NevoRLConfig;

typedef struct NevoNSConfig {
    int k;               /* nearest neighbours in the novelty score */
    int archive_add;     /* GA-NS: random individuals whose BC joins the archive per generation */
    int meta_population; /* NS-ES family: M agents */
    double weight;       /* NSRA-ES: initial reward weight w (NSR-ES uses 0.5, NS-ES 0) */
    double weight_delta; /* NSRA-ES: step of w */
    int patience;        /* NSRA-ES: generations without improvement before w decreases */
} NevoNSConfig;

typedef struct NevoConfig {
    char env[64];
    char dataset[256];     /* supervised data instead of an env: "fashion-mnist", or a
                            * directory of IDX files ("" = reinforcement learning on env) */
    char algo[16];         /* ga, es, rs, ga-ns, ns-es, nsr-es, nsra-es, sgd, vtrace, r2d2 */
    uint64_t seed;
    int population;        /* individuals evaluated per generation */
    int generations;
    long long max_frames;  /* frame budget (0 = none): the last generation is the one
                            * whose frames reach it, so runs compare at equal frames */
    double max_wall_s;     /* wall-time budget in seconds (0 = none): the last generation is
                            * the one whose end brings the run's wall_s (resumes included) to it */
    int threads;           /* 0 = nevo_cpu_count(); never changes results */
    char backend[16];      /* where networks are computed: cpu, cuda; never changes results */
    int episodes;          /* episodes per individual for its fitness */
    int max_episode_steps; /* episode cap for training (0 = the env's own limit) */
    int eval_episodes;     /* episodes of the final evaluation of the best policy */
    int checkpoint_every;  /* generations between checkpoints */
    long long noise_table_floats; /* shared noise table size; 0 = nevo_noise_auto_size */
    int n_env_options;
    NevoEnvOption env_options[NEVO_ENV_MAX_OPTIONS];
    NevoPolicyConfig policy;
    NevoGAConfig ga;
    NevoESConfig es;
    NevoNSConfig ns;
    NevoOptimConfig optim;
    NevoDataConfig data;
    NevoRLConfig rl;
} NevoConfig;

/* Fills every key with its default. */
void nevo_config_defaults(NevoConfig *cfg);

/* Applies a JSON document (an object) on top of cfg. `source` names it in messages
 * ("configs/x.json"); syntax errors report line and column. */
NevoStatus nevo_config_apply_json(NevoConfig *cfg, const char *json_text, const char *source,
                                  NevoError *err);
/* Loads defaults + the JSON file at path. */
NevoStatus nevo_config_load(NevoConfig *cfg, const char *path, NevoError *err);
/* Applies one `key=value` override; the value is JSON (number, true, [1,2]) or else a
 * bare string. */
NevoStatus nevo_config_override(NevoConfig *cfg, const char *assignment, NevoError *err);
/* Every key's type and range again (for configs not read through the functions above,
 * e.g. read back from a file or built in code) and the cross-key checks (truncation <=
 * population, ...); run after all overrides, and by every loader. */
NevoStatus nevo_config_check(const NevoConfig *cfg, NevoError *err);

/* Refuses networks of NEVO_NOISE_MAX_FLOATS parameters or more (the noise table must
 * exceed a network, and is at most that large). */
NevoStatus nevo_config_check_params(size_t nparams, NevoError *err);
/* Refuses a run that would need more than `need` bytes of memory (what_needs says of
 * what, for the message) beyond the limit: the environment's NEVO_MAX_MEMORY_MB (MiB)
 * if set, else the machine's physical memory. So a config, or a crafted checkpoint,
 * asking for more gets one clear error instead of an out-of-memory abort
 * (nevo_algo_check_memory estimates a run's need). */
NevoStatus nevo_config_memory_limit(double need, const char *what_needs, NevoError *err);
/* The resolved config as a JSON text (every key); caller frees. */
char *nevo_config_to_json(const NevoConfig *cfg);
/* Prints the schema (key, type, default, help) to f. */
void nevo_config_print_schema(void *file);

#endif
