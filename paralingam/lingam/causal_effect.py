"""``CausalEffect``: lingam 1.13's interventional effects on a prediction model.

Blobaum and Shimizu (MLSP 2017): with a fitted causal model (an adjacency
matrix ``B`` and a causal order), the expected values of all variables after
an intervention ``do(x_i = v)`` follow from propagating the noise means
through ``B``; a prediction model then scores the intervention.
:class:`CausalEffect` has lingam's interface and arithmetic.
"""

import numpy as np

from .._validation import as_data_matrix

__all__ = ["CausalEffect"]


class CausalEffect:
    """Effects of interventions on the prediction of a model (lingam's interface).

    Parameters
    ----------
    causal_model : fitted model or array-like, shape (n_features, n_features)
        A fitted model with ``adjacency_matrix_`` and ``causal_order_`` (a
        ``paralingam.DirectLiNGAM``, a lingam model, ...), or an adjacency
        matrix that is lower triangular up to a permutation (its causal
        order is then derived as lingam derives it).
    """

    def __init__(self, causal_model):
        self._causal_model = causal_model
        self._B = None
        self._causal_order = None

    def _check_init_params(self):
        if self._B is not None:
            return
        model = self._causal_model
        if hasattr(model, "adjacency_matrix_") and hasattr(model, "causal_order_"):
            self._B = np.asarray(model.adjacency_matrix_, dtype=np.float64)
            self._causal_order = [int(i) for i in model.causal_order_]
            return
        if isinstance(model, (np.ndarray, list)):
            B = np.array(model, dtype=np.float64)
            if B.ndim != 2:
                raise ValueError("Specified 'causal_model' is not matrix")
            if B.shape[0] != B.shape[1]:
                raise ValueError("Specified 'causal_model' is not square matrix.")
            # lingam's order: repeatedly the first variable whose row (among
            # the remaining ones) is zero
            original_index = np.arange(B.shape[0])
            causal_order = []
            B_ = B
            for _ in range(B.shape[0]):
                zero_rows = np.where(np.sum(np.abs(B_), axis=1) < 1e-10)[0]
                if len(zero_rows) == 0:
                    raise ValueError("Specified 'causal_model' is not lower triangular matrix.")
                causal_order.append(int(original_index[zero_rows[0]]))
                original_index = np.delete(original_index, zero_rows[0], 0)
                mask = np.delete(np.arange(len(B_)), zero_rows[0], 0)
                B_ = B_[mask][:, mask]
            self._B = B
            self._causal_order = causal_order
            return
        raise ValueError("Specified 'causal_model' cannot be used: pass a fitted model with "
                         "adjacency_matrix_ and causal_order_, or an adjacency matrix")

    def _get_propagated_effects(self, En, intervention_index, intervention_value):
        effects = np.zeros(len(self._causal_order))
        for i in self._causal_order:
            if i == intervention_index:
                effects[i] = intervention_value
            else:
                effects[i] = np.dot(self._B[i, :], effects) + En[i]
        return effects

    @staticmethod
    def _predict(X, pred_model):
        if hasattr(pred_model, "predict_proba"):
            p0, p1 = pred_model.predict_proba(X.reshape(1, -1))[0]
            return p0 - p1
        if hasattr(pred_model, "predict"):
            return pred_model.predict(X.reshape(1, -1))[0]
        raise ValueError("'pred_model' has no prediction method.")

    def _checked(self, X):
        X = as_data_matrix(X)[0]
        self._check_init_params()
        if X.shape[1] != self._B.shape[0]:
            raise ValueError(f"X has {X.shape[1]} columns but the causal model has "
                             f"{self._B.shape[0]} variables")
        return X

    def estimate_effects_on_prediction(self, X, target_index, pred_model):
        """Effect on the prediction of intervening on each variable by one std.

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)
            Original data.
        target_index : int
            The predicted variable (left out of the model's inputs).
        pred_model : object with ``predict`` or ``predict_proba``

        Returns
        -------
        ndarray, shape (n_features, 2)
            ``|E[Y|do(x_i=mean)] - E[Y|do(x_i=mean+std)]|`` and the same with
            ``mean-std``.
        """
        X = self._checked(X)
        vars_ = [i for i in range(X.shape[1]) if i != target_index]
        Ex = X.mean(axis=0)
        En = Ex - np.dot(self._B, Ex)
        effects = []
        for i in range(X.shape[1]):
            Ex_do = self._get_propagated_effects(En, i, Ex[i])
            Ey_do = self._predict(Ex_do[vars_], pred_model)
            Ex_do = self._get_propagated_effects(En, i, Ex[i] + X[:, i].std())
            Ey1 = Ey_do - self._predict(Ex_do[vars_], pred_model)
            Ex_do = self._get_propagated_effects(En, i, Ex[i] - X[:, i].std())
            Ey2 = Ey_do - self._predict(Ex_do[vars_], pred_model)
            effects.append([np.abs(Ey1), np.abs(Ey2)])
        return np.array(effects)

    def estimate_optimal_intervention(self, X, target_index, pred_model, intervention_index,
                                      desired_output):
        """The intervention on one variable that brings the expected prediction
        to ``desired_output`` (linear regression models only).

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)
        target_index : int
        pred_model : linear regression model with ``coef_`` and ``intercept_``
        intervention_index : int
        desired_output : float

        Returns
        -------
        float
        """
        X = self._checked(X)
        if not hasattr(pred_model, "coef_") and not hasattr(pred_model, "intercept_"):
            raise ValueError("'pred_model' does not have regression coefficient attributes.")
        if hasattr(pred_model, "predict_proba"):
            raise ValueError("'pred_model' is not linear regression model.")
        Ex = X.mean(axis=0)
        En = Ex - np.dot(self._B, Ex)
        s = [i for i in range(X.shape[1]) if i != intervention_index]
        root_vars = np.where(np.sum(self._B, axis=1) == 0)[0].tolist()
        s = [i for i in s if i not in root_vars]
        alpha = np.zeros(self._B.shape[1])
        alpha[intervention_index] = 1
        Ex[intervention_index] = 0
        En[intervention_index] = 0
        # lingam visits the variables in a random order (numpy's global state);
        # the same draws keep the same rounding
        while len(s) > 0:
            k = np.random.choice(s)
            parents = np.where(np.abs(self._B[k]) > 0)[0].tolist()
            if len(set(parents) & set(s)) == 0:
                a = 0
                u = 0
                for q in parents:
                    a = a + self._B[k, q] * alpha[q]
                    if q != intervention_index:
                        u = u + self._B[k, q] * Ex[q]
                Ex[k] = u + En[k]
                alpha[k] = a
                s.remove(k)
        coefs = np.insert(pred_model.coef_, target_index, 0)
        return (desired_output - np.dot(coefs, Ex) - pred_model.intercept_) / np.dot(coefs, alpha)
