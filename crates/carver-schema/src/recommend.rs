// filled in with the recommender
